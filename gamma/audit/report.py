"""One self-contained HTML audit report of a resolution: no network, inline CSS and one
small inline script (filtering excluded facts by reason code).

Every string from the log goes through ``html.escape``; a Content-Security-Policy lets
only the page's own script run (by its hash), so even a value that escaped escaping
could not execute, and forbids every network fetch.

The page is linear in the log (SPEC §5, output size): each fact is rendered once, its explanation
keeps to the events naming it or named by its reasons and names its dependencies by id
(their own sections are on the same page), and the counterfactual re-resolutions of
all facts share one budget and reuse each other's answers.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime

from gamma.audit.diff import diff_records
from gamma.audit.explain import Checker, Explanation, Index, Step, explain_in
from gamma.core.resolving.render import EXPLANATIONS
from gamma.core.resolving.resolution import Resolution
from gamma.core.resolving.resolver import resolve
from gamma.core.terms.canonical import compact_json, format_ts
from gamma.core.terms.model import Actor, Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy

__all__ = ["report", "report_pieces"]

_SCRIPT = """
(function () {
  var rows = document.querySelectorAll('tr.excluded');
  var buttons = document.querySelectorAll('button.filter');
  function show(code) {
    rows.forEach(function (row) {
      var codes = row.getAttribute('data-codes').split(' ');
      row.hidden = !(code === 'all' || codes.indexOf(code) >= 0);
    });
    buttons.forEach(function (b) {
      b.setAttribute('aria-pressed', String(b.getAttribute('data-code') === code));
    });
    document.body.setAttribute('data-filter', code);
  }
  buttons.forEach(function (b) {
    b.addEventListener('click', function () { show(b.getAttribute('data-code')); });
  });
  var m = /^#code=([a-z_]+)$/.exec(location.hash);
  show(m ? m[1] : 'all');
})();
"""

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #dde2ea}
h3{font-size:14px;margin:12px 0 4px;color:#45506a}
table{border-collapse:collapse;width:100%;background:#fff}td,th{border:1px solid #e3e7ee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f1f4f8}code,.mono,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
.meta{color:#55607a}.meta code{color:#1d2330}
.code{display:inline-block;background:#fde8e8;color:#8a1c1c;border-radius:3px;padding:0 5px;margin:1px;font-size:12px}
.hidden-v{color:#8790a4;font-style:italic}
button.filter{border:1px solid #c5ccd8;background:#fff;border-radius:12px;padding:2px 10px;margin:2px;cursor:pointer}
button.filter[aria-pressed=true]{background:#264fd1;color:#fff;border-color:#264fd1}
details{margin:6px 0;background:#fff;border:1px solid #e3e7ee;border-radius:4px;padding:4px 8px}
summary{cursor:pointer;font-weight:600}pre{white-space:pre-wrap;margin:6px 0}
svg text{font:10px system-ui,sans-serif;fill:#45506a}
.legend{margin:12px 0;padding:6px 8px;background:#fff;border:1px solid #e3e7ee;border-radius:4px}
.legend svg{vertical-align:middle}
"""

_COLORS = {"assert": "#264fd1", "retract": "#c62828", "promote": "#2e7d32", "grant": "#00897b",
           "revoke": "#ef6c00", "window": "#7b1fa2"}


def _swatch(color: str) -> str:
    return (f'<svg width="14" height="14" viewBox="0 0 14 14" aria-hidden="true">'
            f'<circle cx="7" cy="7" r="6" fill="{color}"/></svg>')


# Once per page: how to read every fact's timeline.
_LEGEND = (
    '<div class="legend"><b>Reading a timeline</b>: each mark is an event that bears on the '
    "fact, left to right in log order (horizontal axis: log order, with each event's id and "
    "UTC time, month-day hour:minute, below its mark; the red line at the right is t, the "
    "time asked about). "
    + " ".join(f"{_swatch(color)} {name}" for name, color in _COLORS.items())
    + ' <svg width="24" height="10" aria-hidden="true"><rect x="0" y="1" width="24" height="8" rx="3" '
    'fill="#cfe8d2"/></svg> validity, admitted <svg width="24" height="10" aria-hidden="true">'
    '<rect x="0" y="1" width="24" height="8" rx="3" fill="#f4c7c7"/></svg> validity, excluded '
    '(the bar runs from the assert to what ended it, or to t). Hover a mark for what it did.</div>'
)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _json_html(value: object) -> str:
    return _e(compact_json(value))


def report(
    events: Sequence[Event],
    actor: Actor | dict[str, object],
    at: datetime | str,
    *,
    policy: Policy | None = None,
    auditor: bool = False,
    compare: datetime | str | None = None,
    title: str | None = None,
) -> str:
    """The HTML page (a str) for ``actor`` at ``at``; ``compare`` adds the audit diff to that time."""
    return "\n".join(report_pieces(events, actor, at, policy=policy, auditor=auditor,
                                   compare=compare, title=title))


def report_pieces(
    events: Sequence[Event],
    actor: Actor | dict[str, object],
    at: datetime | str,
    *,
    policy: Policy | None = None,
    auditor: bool = False,
    compare: datetime | str | None = None,
    title: str | None = None,
) -> Iterator[str]:
    """The page of ``report`` as its lines, made as they are asked for: a writer that joins them
    with newlines as it goes never holds a page of gigabytes (a 1M-link chain's is 1.8 GB)."""
    policy = policy or DEFAULT_POLICY
    res = resolve(events, actor, at, policy)
    index = Index.build(events, res, policy)
    checker = Checker.for_log(events, res, policy)

    def explanation(fact: str) -> Explanation:  # made when its section is written, then dropped
        return explain_in(index, fact, auditor=auditor, checker=checker, brief=True)

    order = _assert_positions(events)
    yield "<!DOCTYPE html>"
    yield '<html lang="en"><head><meta charset="utf-8">'
    yield ('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
           f"style-src 'unsafe-inline'; script-src '{_script_hash()}'; img-src data:\">")
    yield f"<title>{_e(title or 'gamma audit report')}</title><style>{_CSS}</style></head>"
    yield "<body>"
    yield _header(res, auditor)
    if compare is not None:  # the difference first: it is what a comparison is asked for
        other = resolve(events, res.actor, compare, policy)
        diff = diff_records(res.to_dict(), other.to_dict())
        label_a, label_b = format_ts(res.at), format_ts(other.at)
        yield f'<h2 id="compare">Audit diff: {_e(label_a)} → {_e(label_b)}</h2>'
        yield f'<pre class="diff">{_e(diff.render(a=label_a, b=label_b))}</pre>'
    yield _LEGEND
    yield from _admitted_section(res, explanation, order)
    yield from _excluded_section(res, index, explanation, order, auditor)
    yield f"<script>{_SCRIPT}</script></body></html>"
    yield ""


def _script_hash() -> str:
    digest = hashlib.sha256(_SCRIPT.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def _assert_positions(events: Sequence[Event]) -> dict[str, int]:
    order: dict[str, int] = {}
    for pos, e in enumerate(events):
        fact = getattr(e, "fact", None)
        if e.TYPE == "assert" and isinstance(fact, str):
            order.setdefault(fact, pos)
    return order


def _header(res: Resolution, auditor: bool) -> str:
    a = res.actor
    view = "auditor view: withheld values shown" if auditor else "actor view"
    rows = [
        ("actor", f"{a.id} (tenant {a.tenant}, scope {a.scope}, roles {', '.join(a.roles) or 'none'},"
                  f" clearance {a.clearance})"),
        ("at", format_ts(res.at)),
        ("policy", res.policy),
        ("log head", res.log),
        ("digest", res.digest),
        ("view", view),
    ]
    body = "".join(f"<div><b>{_e(k)}</b> <code>{_e(v)}</code></div>" for k, v in rows)
    return (f'<h1>Audit report: what {_e(a.id)} may rely on at {_e(format_ts(res.at))}</h1>'
            f'<div class="meta">{body}</div>')


def _admitted_section(res: Resolution, explanation: Callable[[str], Explanation],
                      order: dict[str, int]) -> Iterator[str]:
    ordered = sorted(res.admitted, key=lambda a: (a.key, order.get(a.fact, 0)))
    groups = [
        ("Binding", [a for a in ordered if not a.needs_recheck and a.priority == "hard" and a.kind != "preference"]),
        ("Preferences", [a for a in ordered if not a.needs_recheck and not (a.priority == "hard" and a.kind != "preference")]),
        ("Needs recheck", [a for a in ordered if a.needs_recheck]),
    ]
    yield f'<h2 id="admitted">Admitted ({len(res.admitted)})</h2>'
    for name, items in groups:
        if not items:
            continue
        yield (f"<h3>{_e(name)}</h3><table><tr><th>fact</th><th>key</th><th>value</th>"
               "<th>scope</th><th>authority</th><th>kind</th></tr>")
        for a in items:
            yield (
                f'<tr class="admitted" id="fact-{_e(a.fact)}" data-fact="{_e(a.fact)}"><td class="mono">{_e(a.fact)}</td>'
                f'<td class="mono">{_e(a.key)}</td><td class="mono value">{_json_html(a.value)}</td>'
                f"<td>{_e(a.scope)}</td><td>{_e(a.authority)}</td><td>{_e(a.kind)}/{_e(a.priority)}</td></tr>"
            )
        yield "</table>"
    yield from _details((explanation(a.fact) for a in ordered), open_=False)


def _excluded_section(res: Resolution, index: Index,
                      explanation: Callable[[str], Explanation],
                      order: dict[str, int], auditor: bool) -> Iterator[str]:
    items = sorted(res.excluded, key=lambda x: (order.get(x.fact, len(order)), x.fact))
    codes = sorted({c for x in items for c in x.codes})
    yield (f'<h2 id="excluded">Excluded ({len(items)})</h2><div class="filters">'
           '<button class="filter" data-code="all">all</button>')
    yield from (f'<button class="filter" data-code="{_e(c)}">{_e(c)}</button>' for c in codes)
    yield '</div><table><tr><th>fact</th><th>key</th><th>codes</th><th>why</th><th>value</th></tr>'
    for x in items:
        asserted = index.asserts.get(x.fact)
        if asserted is not None and asserted.value is None:  # erased (SPEC §21): for everyone
            value = '<span class="hidden-v">erased</span>'
        elif auditor and asserted is not None:
            value = f'<span class="mono value">{_json_html(asserted.value)}</span>'
        else:
            value = '<span class="hidden-v">withheld</span>'
        why = "; ".join(
            EXPLANATIONS[r.code] + (f" ({', '.join(r.facts)})" if r.facts else "") for r in x.reasons
        )
        yield (
            f'<tr class="excluded" id="fact-{_e(x.fact)}" data-fact="{_e(x.fact)}" data-codes="{_e(" ".join(x.codes))}">'
            f'<td class="mono">{_e(x.fact)}</td><td class="mono">{_e(x.key if x.key is not None else "-")}</td>'
            f"<td>{''.join(f'<span class=code>{_e(c)}</span>' for c in x.codes)}</td>"
            f"<td>{_e(why)}</td><td>{value}</td></tr>"
        )
    yield "</table>"
    yield from _details((explanation(x.fact) for x in items), open_=True)


def _details(items: Iterable[Explanation], *, open_: bool) -> Iterator[str]:
    empty = True
    for ex in items:
        empty = False
        label = ex.decision + (f": {', '.join(ex.codes)}" if ex.codes else "")
        yield (
            f'<details class="explain" data-fact="{_e(ex.fact)}"{" open" if open_ else ""}><summary>{_e(ex.fact)} — {_e(label)}</summary>'
            f"{_svg(ex)}<pre>{_e(ex.render())}</pre></details>"
        )
    if empty:
        yield ""  # no facts: an empty line, as the page has always had


def _svg(ex: Explanation) -> str:
    """The fact's timeline in time order, one mark per step (evenly spaced, each labelled
    with its time), the validity window as a bar up to its end, and t marked last."""
    steps = [s for s in ex.timeline if s.ts is not None]
    if not steps:
        return ""
    width, left, gap = 760, 30, min(110, 700 // (len(steps) + 1))

    def x(i: int) -> int:
        return left + i * gap

    marks = []
    own = [i for i, s in enumerate(steps) if s.type == "assert" and not s.facts]
    ends = [i for i, s in enumerate(steps) if s.did.startswith(("retracted", "superseded", "window closed",
                                                                "outranked", "overridden"))]
    if own:
        x0 = x(own[0])
        x1 = x(ends[0]) if ends and ends[0] > own[0] else x(len(steps))
        color = "#f4c7c7" if ex.decision == "excluded" else "#cfe8d2"
        marks.append(f'<rect x="{x0}" y="22" width="{max(x1 - x0, 2)}" height="8" rx="3" fill="{color}"/>')
    for i, s in enumerate(steps):
        assert s.ts is not None
        color = _COLORS.get(s.type, "#555")
        marks.append(
            f'<circle cx="{x(i)}" cy="26" r="6" fill="{color}"><title>{_e(_step_title(s))}</title></circle>'
            f'<text x="{x(i)}" y="50" text-anchor="middle">{_e(s.event or s.type)}</text>'
            f'<text x="{x(i)}" y="63" text-anchor="middle">{_e(s.ts[5:16].replace("T", " "))}</text>'
        )
    tx = x(len(steps))
    marks.append(f'<line x1="{tx}" y1="6" x2="{tx}" y2="40" stroke="#c62828" stroke-width="2"/>'
                 f'<text x="{tx}" y="50" text-anchor="middle" fill="#c62828">t</text>'
                 f'<text x="{tx}" y="63" text-anchor="middle">{_e(ex.at[5:16].replace("T", " "))}</text>')
    return (f'<svg class="timeline" role="img" width="{width}" height="86" viewBox="0 0 {width} 86">'
            f'<title>{_e("timeline of " + ex.fact)}</title>'
            f'<line x1="{left - 10}" y1="26" x2="{tx}" y2="26" stroke="#9aa4b8"/>'
            + "".join(marks)
            + f'<text x="{left - 10}" y="80">log order → (event id, then UTC time month-day hh:mm)</text>'
            "</svg>")


def _step_title(s: Step) -> str:
    return " ".join(x for x in (s.ts, s.event, s.type, s.writer, s.did) if x)

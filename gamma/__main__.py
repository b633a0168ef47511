"""``python -m gamma``: the ``gamma`` command, for where the console script is not on PATH."""

from gamma.cli import main

if __name__ == "__main__":
    main()

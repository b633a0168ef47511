"""StateBench timelines into conformance cases: ``fields`` reads typed fields, ``read``
builds the events, ``expect`` derives expectations, ``importer`` writes the cases."""

"""What a run keeps on disk, one module per file: records, progress.json, history.jsonl,
run.lock, run_manifest.json, and the prompt files it reads.

Every reader and writer of those files is here, so the engine, the hosts, export and the
report agree on one layout; the watcher (stdlib only, shipped to the box) has its own
readers of the same files, and these call it where the rule must be one.
"""

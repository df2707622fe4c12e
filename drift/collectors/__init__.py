"""Collectors: read the live system and yield Facts and CollectionErrors; no database.

`registry` lists them and what each may write; `base` is what a collector
is; docs/collectors.md is the contract and how to add one.
"""

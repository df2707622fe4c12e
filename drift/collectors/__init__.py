"""Collectors: read the live system and yield Facts and CollectionErrors; no database.

`registry` lists them and the subject kinds each writes (declared, with
their keys, in `drift.subjects`); `base` is what a collector is;
docs/collectors.md is the contract and how to add one.
"""

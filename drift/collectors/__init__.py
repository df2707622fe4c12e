"""Collectors: read the live system and yield Facts and CollectionErrors; no database."""

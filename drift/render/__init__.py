"""Rendering a plain context for people and scripts: the JSON envelope, Jinja templates
(text, Markdown, HTML) and terminal wrapping. Nothing here reads the history."""

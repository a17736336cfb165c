"""Renders the judgement: the report model built from the store (model.py, build.py) and its terminal,
Markdown, JSON, SVG and HTML forms and badges. Renderers only render; they never decide."""

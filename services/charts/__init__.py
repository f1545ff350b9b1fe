"""Plotly figure builders, one module per area: pure functions from domain objects to go.Figure."""

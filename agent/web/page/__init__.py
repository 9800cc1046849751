"""The node page at ``/`` (docs/node-page.md): what the agent knows, as one server-rendered HTML page.

``model`` gathers it from the agent's state on request (the exported judgement, the stored readings, the
collectors' states, the in-memory history of ``agent.core.history``); ``render`` writes the HTML and
``charts`` the inline SVG sparklines. Nothing here judges a reading or runs a tool.
"""

"""Adapters for agent frameworks, one module and one extra each.

- ``sagacity.integrations.pydantic_ai`` — ``pip install 'sagacity[pydantic-ai]'``
- ``sagacity.integrations.langchain`` — ``pip install 'sagacity[langchain]'``
- ``sagacity.integrations.openai_agents`` — ``pip install 'sagacity[openai-agents]'``
- ``sagacity.integrations.agent_framework`` — ``pip install 'sagacity[agent-framework]'``
- ``sagacity.integrations.crewai`` — ``pip install 'sagacity[crewai]'`` (not beside the extras above)
- ``sagacity.integrations.google_adk`` — ``pip install 'sagacity[google-adk]'``

Each is built on :mod:`sagacity.framework` only; importing one without its extra raises
``ConfigurationError`` naming the extra to install. See docs/integrations/.
"""

"""The texts the model is told (see ``acp_agent.engine.instructions``)."""

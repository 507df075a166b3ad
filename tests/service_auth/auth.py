"""Two users for tests/test_service_auth.py, as a LangGraph team writes its ``Auth``."""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

auth = Auth()

USERS = {"token-ada": "ada", "token-bob": "bob"}


@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    token = (authorization or "").removeprefix("Bearer ")
    if token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="who are you?")
    return USERS[token]


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Each user's threads and runs are theirs: marked on create, filtered on every read."""
    mine = {"owner": ctx.user.identity}
    if isinstance(value, dict):
        metadata = value.setdefault("metadata", {})
        if isinstance(metadata, dict):
            metadata.update(mine)
    return mine


@auth.on.assistants.read
async def read_assistants(ctx: Auth.types.AuthContext, value: Any) -> None:
    return None  # the graphs' assistants are everyone's to run


@auth.on.assistants.delete
async def no_deleting(ctx: Auth.types.AuthContext, value: Any) -> bool:
    return ctx.user.identity == "ada"  # bob may not delete assistants

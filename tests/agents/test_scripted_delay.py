"""The scripted model's configurable delay (HITL_SCRIPTED_DELAY)."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import HumanMessage

from agents.models import ModelConfigError, get_model


def test_the_scripted_model_takes_the_configured_delay(monkeypatch):
    monkeypatch.setenv("HITL_SCRIPTED_DELAY", "0.3")
    model = get_model("scripted")
    started = time.monotonic()
    reply = model.invoke([HumanMessage("hi")])
    assert time.monotonic() - started >= 0.3
    assert "You said: hi" in reply.text


def test_no_delay_by_default(monkeypatch):
    monkeypatch.delenv("HITL_SCRIPTED_DELAY", raising=False)
    assert get_model("scripted").delay == 0


@pytest.mark.parametrize("value", ["slow", "-1", "nan", "601", "inf"])
def test_a_bad_delay_fails_loudly(monkeypatch, value):
    monkeypatch.setenv("HITL_SCRIPTED_DELAY", value)
    with pytest.raises(ModelConfigError, match="HITL_SCRIPTED_DELAY"):
        get_model("scripted")

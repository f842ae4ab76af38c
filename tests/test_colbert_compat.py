"""colbert-ai on transformers 5: the class factory wrapper, without colbert-ai or a model."""

from __future__ import annotations

from typing import Any

import pytest

from rankers.families.colbert_compat import needs_post_init, with_post_init


@pytest.mark.parametrize(
    ("version", "needed"),
    [("4.57.6", False), ("4.99.0.dev0", False), ("5.0.0", True), ("5.24.0", True), ("6.1", True)],
)
def test_post_init_is_needed_from_transformers_5(version: str, needed: bool) -> None:
    assert needs_post_init(version) is needed


class FakeHFColBERT:
    """colbert-ai's HF_ColBERT as transformers 5 sees it: ``__init__`` without ``post_init``."""

    def __init__(self, config: Any, colbert_config: Any) -> None:
        self.config, self.colbert_config = config, colbert_config
        self.calls: list[str] = ["init"]

    def post_init(self) -> None:
        self.calls.append("post_init")
        self.all_tied_weights_keys: dict[str, str] = {}

    @classmethod
    def from_pretrained(cls, name: str) -> str:
        return f"{cls.__name__} from {name}"


def test_classes_of_the_wrapped_factory_end_init_with_post_init() -> None:
    asked: list[str] = []

    def factory(name_or_path: str) -> type:
        asked.append(name_or_path)
        return FakeHFColBERT

    wrapped = with_post_init(factory)
    cls = wrapped("/models/bert")
    assert asked == ["/models/bert"]
    model = cls("config", "colbert config")
    assert model.calls == ["init", "post_init"]  # once, after colbert-ai's own __init__
    assert model.all_tied_weights_keys == {}
    assert (model.config, model.colbert_config) == ("config", "colbert config")
    # a subclass that keeps colbert-ai's name and class methods
    assert isinstance(model, FakeHFColBERT) and cls.__name__ == "FakeHFColBERT"
    assert cls.from_pretrained("x") == "FakeHFColBERT from x"
    assert with_post_init(wrapped) is wrapped  # installing twice wraps once

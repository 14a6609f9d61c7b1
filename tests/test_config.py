"""council.toml: providers and named councils, read and checked; routing a model id; a
council's options with the user's on top; what the CLI does with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import config as app_config
from app import councils
from council.config import ConfigProblem, parse_config, route, with_overrides
from tests.temporal_fixtures import starter

FILE = """
[providers.local]
base_url = "http://127.0.0.1:11434/v1"
api_key_env = "LOCAL_KEY"
models = ["llama*", "qwen*"]

[providers.lab]
base_url = "https://lab.example/v1"
models = ["lab/*", "qwen2.5-coder"]
stream = false
extra_headers = { "X-Team" = "council" }
context_window = 8192

[councils.quick]
models = ["llama3.2", "qwen2.5", "openai/gpt-4o-mini"]
chairman = "openai/gpt-4o-mini"
max_rounds = 1
policy = { max_attempts = 2 }

[councils.default]
models = ["lab/a", "lab/b"]
"""


def test_a_model_goes_to_the_first_provider_that_matches_else_the_default() -> None:
    config = parse_config(FILE)
    assert route("llama3.2", config.providers) == "local"
    assert route("qwen2.5-coder", config.providers) == "local"  # file order: local first
    assert route("lab/x", config.providers) == "lab"
    assert route("openai/gpt-4o-mini", config.providers) == "default"
    assert route("LLAMA3", config.providers) == "default"  # ids are matched as they are
    assert config.providers["lab"].stream is False
    assert config.providers["lab"].extra_headers == {"X-Team": "council"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[providers.x]\nbase_url = "ftp://x"\nmodels = ["a"]', "providers.x.base_url must be"),
        ('[providers.x]\nbase_url = "http://x"\nmodels = ["a["]', "opens a bracket"),
        ('[providers.x]\nbase_url = "http://x"\nmodels = ["a b"]', "white space"),
        ('[providers.x]\nbase_url = "http://x"\nmodels = []', "providers.x.models"),
        (
            '[providers.x]\nbase_url = "http://x"\nmodels = ["a"]\napi_key = "s"',
            "api_key is not a known key",
        ),
        (
            '[providers.x]\nbase_url = "http://x"\nmodels = ["a"]\napi_key_env = "a b"',
            "not a variable name",
        ),
        ('[providers.default]\nbase_url = "http://x"\nmodels = ["a"]', "is reserved"),
        ("[councils.q]\nmax_rounds = 1", "councils.q.models is required"),
        (
            '[councils.q]\nmodels = ["a", "b"]\nmax_rounds = 9',
            "councils.q.max_rounds must be between 1 and 5",
        ),
        (
            '[councils.q]\nmodels = ["a", "b"]\nquestion = "x"',
            "councils.q.question is not a council option",
        ),
        ("[colors]\nred = 1", "colors is not a known key"),
        ("x = ", "not valid TOML"),
    ],
)
def test_a_config_error_is_one_line_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigProblem) as problem:
        parse_config(text, "my.toml")
    assert str(problem.value).startswith("my.toml: ") and message in str(problem.value)
    assert "\n" not in str(problem.value)


def test_a_key_variable_named_but_unset_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "council.toml"
    path.write_text(FILE)
    env = {"COUNCIL_CONFIG": str(path)}
    with pytest.raises(ConfigProblem, match=r"providers\.local\.api_key_env names LOCAL_KEY"):
        app_config.load(env, keys=True)
    assert app_config.load(env).providers["local"].api_key_env == "LOCAL_KEY"  # no model call
    config = app_config.load({**env, "LOCAL_KEY": "k"}, keys=True)
    assert list(config.providers) == ["local", "lab"]
    with pytest.raises(ConfigProblem, match="COUNCIL_CONFIG: no such file"):
        app_config.load({"COUNCIL_CONFIG": str(tmp_path / "none.toml")})


def test_the_default_council_is_the_variables_then_the_file_then_the_built_in() -> None:
    config = parse_config(FILE)
    assert councils.council_options(config, None, {})["models"] == ["lab/a", "lab/b"]
    from_env = councils.council_options(
        config, None, {"COUNCIL_MODELS": "x, y", "COUNCIL_CHAIRMAN": "y"}
    )
    assert from_env == {"models": ["x", "y"], "chairman": "y"}
    empty = parse_config("")
    assert councils.council_options(empty, None, {})["models"] == list(councils.DEFAULT_MODELS)
    assert councils.council_options(config, "quick", {})["max_rounds"] == 1
    with pytest.raises(councils.UnknownCouncil, match="known: default, quick"):
        councils.council_options(config, "slow", {})
    assert councils.council_names(config) == ["default", "quick"]


def test_the_users_options_go_on_top_of_the_councils() -> None:
    quick = parse_config(FILE).council("quick")
    merged = with_overrides(quick, {"max_rounds": 3, "policy": {"call_timeout_seconds": 9}})
    assert merged["max_rounds"] == 3
    assert merged["policy"] == {"max_attempts": 2, "call_timeout_seconds": 9}
    assert merged["chairman"] == "openai/gpt-4o-mini"
    # Other members, no chairman given: the council's chairman goes if it is not among them.
    assert "chairman" not in with_overrides(quick, {"models": ["a", "b"]})
    kept = with_overrides(quick, {"models": ["openai/gpt-4o-mini", "b"]})
    assert kept["chairman"] == "openai/gpt-4o-mini"


async def test_start_with_a_named_council_and_flags_on_top(
    council, cli_env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "council.toml"
    path.write_text(
        "[councils.trio]\n"
        'models = ["sim/atlas", "sim/borealis", "sim/cirrus"]\n'
        'chairman = "sim/borealis"\n'
        "max_rounds = 1\nmin_rounds = 0\n"
    )
    env = {**cli_env, "COUNCIL_CONFIG": str(path)}
    code, out, err = await starter(
        "start", "Which?", "--council", "trio", "--max-rounds", "2", "--wait", "--json", env=env
    )
    assert code == 0, err
    from council.models import DeliberationRecord

    record = DeliberationRecord.model_validate_json(out)
    assert record.models == ["sim/atlas", "sim/borealis", "sim/cirrus"]
    assert record.chairman == "sim/borealis"
    assert record.iteration.max_rounds == 2 and record.iteration.min_rounds == 0
    code, _, err = await starter("start", "Which?", "--council", "nope", env=env)
    assert (
        code == 2 and err.strip() == "starter: --council: no council 'nope' (known: default, trio)"
    )
    path.write_text("[councils.bad]\nmax_rounds = 1\n")
    code, _, err = await starter("start", "Which?", env=env)
    assert code == 2 and err.strip() == f"starter: {path}: councils.bad.models is required"

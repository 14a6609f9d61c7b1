"""council.toml: providers and named councils, read and checked; routing a model id; a
council's options with the user's on top; what the CLI does with them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.settings import config as app_config
from app.settings import councils
from council.config import ConfigProblem, parse_config, route, with_overrides
from harness.processes import ROOT
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
            "providers.x.api_key_env must be a variable's name",
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


def test_the_default_council_is_the_variables_then_the_file_then_the_built_in(
    tmp_path: Path,
) -> None:
    config = parse_config(FILE)
    none = {"COUNCIL_DATA": str(tmp_path)}  # no local stack runs
    assert councils.council_options(config, None, none)["models"] == ["lab/a", "lab/b"]
    from_env = councils.council_options(
        config, None, {**none, "COUNCIL_MODELS": "x, y", "COUNCIL_CHAIRMAN": "y"}
    )
    assert from_env == {"models": ["x", "y"], "chairman": "y"}
    empty = parse_config("")
    assert councils.council_options(empty, None, none)["models"] == list(councils.DEFAULT_MODELS)
    assert councils.council_options(config, "quick", none)["max_rounds"] == 1
    with pytest.raises(councils.UnknownCouncil, match="known: default, quick"):
        councils.council_options(config, "slow", none)
    assert councils.council_names(config) == ["default", "quick"]


def test_a_running_local_stack_gives_its_default_council_where_it_runs(tmp_path: Path) -> None:
    config = parse_config(FILE + "max_rounds = 1\n")  # [councils.default]: lab/a, lab/b
    here = {
        "COUNCIL_DATA": str(tmp_path),
        "TEMPORAL_ADDRESS": "localhost:17233",
        "COUNCIL_TASK_QUEUE": "up-queue",
    }
    path = councils.local_council_path(here)
    assert path == tmp_path / "default-council.json"
    councils.write_local_council(path, ["sim/atlas", "sim/borealis"], "sim/borealis", here)
    # The stack's members and chairman, the other options of [councils.default].
    options = councils.council_options(config, None, here)
    assert options == {
        "models": ["sim/atlas", "sim/borealis"],
        "chairman": "sim/borealis",
        "max_rounds": 1,
    }
    # The same server under another loopback name.
    same = {**here, "TEMPORAL_ADDRESS": "127.0.0.1:17233"}
    assert councils.council_options(config, None, same)["models"] == ["sim/atlas", "sim/borealis"]
    # COUNCIL_MODELS wins; another server, namespace or task queue does not see it.
    mine = councils.council_options(config, None, {**here, "COUNCIL_MODELS": "x,y"})
    assert mine["models"] == ["x", "y"] and "chairman" not in mine
    for elsewhere in (
        {"TEMPORAL_ADDRESS": "localhost:7233"},
        {"TEMPORAL_NAMESPACE": "other"},
        {"COUNCIL_TASK_QUEUE": "council"},
    ):
        assert councils.council_options(config, None, {**here, **elsewhere})["models"] == [
            "lab/a",
            "lab/b",
        ]
    # A file left by a stack that is gone (its process ended) counts for nothing.
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "pid": dead_pid()}))
    assert councils.council_options(config, None, here)["models"] == ["lab/a", "lab/b"]
    # The process that wrote it removes it when it stops.
    path.write_text(json.dumps(data))
    councils.remove_local_council(path)
    assert not path.exists()


def dead_pid() -> int:
    """The id of a process that has ended."""
    process = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(process.stdout)


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


# A key written where council.toml wants a variable's name, with dashes or with underscores
# only (which a variable's name may hold).
KEYS = ("sk-or-v1-5ecret0123456789abcdef", "sk_or_v1_5ecret0123456789abcdef")
ENTRY_POINTS = {
    "worker": ["worker.py"],
    "starter": ["starter.py", "start", "Q?"],
    "MCP server": ["starter.py", "mcp"],
    "web page": ["-m", "web", "--port", "1"],
}


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
async def test_a_key_in_place_of_a_variable_name_stops_every_entry_point_unechoed(
    tmp_path: Path, key: str, entry: str
) -> None:
    path = tmp_path / "council.toml"
    path.write_text(
        f'[providers.lab]\nbase_url = "http://127.0.0.1:1/v1"\nmodels = ["lab/*"]\n'
        f'api_key_env = "{key}"\n'
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("COUNCIL_", "TEMPORAL_"))},
        "COUNCIL_CONFIG": str(path),
        "TEMPORAL_ADDRESS": "127.0.0.1:1",  # nothing answers: the file is read first
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *ENTRY_POINTS[entry],
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = (part.decode() for part in await asyncio.wait_for(process.communicate(), 60))
    assert process.returncode == 2, (out, err)
    expected = (
        f"{path}: providers.lab.api_key_env: this looks like a key, not a variable name: put "
        "the key in an environment variable and write that variable's name here"
    )
    assert expected in err and err.count("\n") == 1, err
    assert "5ecret" not in out + err

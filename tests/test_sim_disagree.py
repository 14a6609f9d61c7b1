"""The simulator's members agree or disagree at stage 1 in the share a run sets
(`python -m simulator --disagree SHARE`, SimulatorConfig.disagree): on the contested
problems the four personas' first answers differ, on the others all four are right; unset,
each persona slips at its own rate as before. Over HTTP, with the council's own stage 1
prompt."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from council.prompts import answer_prompt
from grading.dataset import Problem, load_dataset
from simulator import SimulatorConfig, SimulatorServer
from simulator.__main__ import main, parse_args
from simulator.problems import SKILLS, stage1_value

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = load_dataset(ROOT / "datasets" / "gsm8k_test_subset.jsonl").problems
PERSONAS = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]


_FIRSTS: dict[tuple[str, float | None], dict[str, str]] = {}


def firsts(problem: Problem, disagree: float | None) -> dict[str, str]:
    """Each persona's first answer to the problem (read once: a pure function)."""
    key = (problem.id, disagree)
    if key not in _FIRSTS:
        _FIRSTS[key] = {
            name: stage1_value(name, skill, problem, disagree=disagree)
            for name, skill in SKILLS.items()
        }
    return _FIRSTS[key]


def disagreeing(disagree: float | None) -> list[Problem]:
    return [p for p in PROBLEMS if len(set(firsts(p, disagree).values())) > 1]


@pytest.mark.parametrize("share", [0.0, 0.3, 0.5, 1.0])
def test_the_share_of_problems_whose_first_answers_disagree_is_the_one_set(
    share: float,
) -> None:
    contested = disagreeing(share)
    # A hash of each problem decides: the share over the set is the one set, within what
    # the set's size allows.
    assert len(contested) / len(PROBLEMS) == pytest.approx(share, abs=0.12)
    for problem in PROBLEMS:
        if problem not in contested:
            assert set(firsts(problem, share).values()) == {problem.expected.shown}
    if share == 1.0:
        assert len(contested) == len(PROBLEMS)
    if share == 0.0:
        assert contested == []


def test_contested_problems_keep_each_personas_own_mistakes() -> None:
    # Where the four disagree anyway, each gives the answer it gives without the setting.
    natural = disagreeing(None)
    assert natural, "the set has problems the personas disagree on"
    for problem in natural:
        assert firsts(problem, 1.0) == firsts(problem, None)
    # Unset, each persona slips at its own rate.
    for name, skill in SKILLS.items():
        slips = [firsts(p, None)[name] != p.expected.shown for p in PROBLEMS]
        assert sum(slips) / len(slips) == pytest.approx(skill.slip, abs=0.12), name


def test_a_seeded_sample_is_unchanged_by_the_setting() -> None:
    problem = PROBLEMS[0]
    for name, skill in SKILLS.items():
        assert stage1_value(name, skill, problem, 7, 0.0) == stage1_value(name, skill, problem, 7)


def test_the_flag_takes_a_share_between_0_and_1() -> None:
    assert parse_args(["--disagree", "0.25"]).disagree == 0.25
    assert parse_args([]).disagree is None
    for wrong in ("1.5", "-0.1", "x"):
        with pytest.raises(SystemExit):
            parse_args(["--disagree", wrong])


def test_the_variable_sets_it_and_a_wrong_one_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COUNCIL_SIM_DISAGREE", "1.5")
    assert main(["--port", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "simulator: COUNCIL_SIM_DISAGREE must be between 0 and 1 (got 1.5)"
    )


async def test_over_http_the_members_first_answers_follow_the_share() -> None:
    problem = next(p for p in PROBLEMS if p in disagreeing(None))  # they disagree unset
    ask = [m.model_dump() for m in answer_prompt(problem.prompt(), 100_000)]
    for share, differ in ((0.0, False), (1.0, True)):
        with SimulatorServer(SimulatorConfig(disagree=share)) as sim:
            async with httpx.AsyncClient(base_url=sim.url) as http:
                values = set()
                for model in PERSONAS:
                    reply = await http.post(
                        "/chat/completions", json={"model": model, "messages": ask}
                    )
                    text = reply.json()["choices"][0]["message"]["content"]
                    values.add(problem.read(text).shown)
        assert (len(values) > 1) is differ, (share, values)

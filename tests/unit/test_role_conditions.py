"""Which kstatus conditions a role sets itself, read from its files before any run:
the operator then never writes them for the watch's objects."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_operator.reconciler.role_conditions import conditions_named

ROLES = Path(__file__).resolve().parents[2] / "roles"

SETTING = [
    "conditions:\n  - type: {t}\n    status: 'True'\n",
    "conditions: [{{type: {t}, status: 'False'}}]\n",
    "ready: \"{{{{ {{'type': '{t}', 'status': 'True'}} }}}}\"\n",
    '{{"type": "{t}", "status": "True"}}\n',
]
READING = [
    "x: \"{{{{ conditions | selectattr('type', 'eq', '{t}') | first }}}}\"\n",
    "when: item.type == '{t}'\n",
    "- name: wait for {t}\n",
    "conditions:\n  - type: {t}Ish\n",
]


def role(tmp_path: Path, text: str, file: str = "tasks/main.yml") -> Path:
    path = tmp_path / "role" / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return tmp_path / "role"


@pytest.mark.parametrize("form", SETTING)
@pytest.mark.parametrize("kind", ["Ready", "Reconciling", "Stalled"])
def test_a_condition_the_role_writes_is_its_own(tmp_path: Path, form: str, kind: str) -> None:
    assert conditions_named(role(tmp_path, form.format(t=kind), "tasks/status.yaml"), None) == {
        kind
    }


@pytest.mark.parametrize("form", READING)
def test_a_condition_the_role_only_reads_or_names_is_not(tmp_path: Path, form: str) -> None:
    assert conditions_named(role(tmp_path, form.format(t="Ready")), None) == frozenset()


@given(st.sampled_from(SETTING), st.text(alphabet="abcdefgh: -\n'\"{}", max_size=60))
def test_the_scan_finds_a_setting_whatever_surrounds_it(form: str, noise: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as where:
        playbook = Path(where) / "play.yml"
        playbook.write_text(noise + "\n" + form.format(t="Stalled") + noise)
        assert "Stalled" in conditions_named(None, playbook)


def test_the_samples_that_report_a_summary_ready_own_it_and_the_others_do_not() -> None:
    assert conditions_named(ROLES / "apiserviceexport", None) == {"Ready"}
    assert conditions_named(ROLES / "capi_samplecluster", None) == {"Ready"}
    # The Harbor role reads its dependents' Ready, and sets ConfigurationReady, ServiceReady.
    assert conditions_named(ROLES / "harborcluster", None) == frozenset()

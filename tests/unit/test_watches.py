from pathlib import Path

import pytest

from ansible_operator.kube.types import GVK
from ansible_operator.project.watches import LabelSelector, WatchesError, load_watches

REPO_OPERATOR = Path(__file__).resolve().parents[1] / "operator"


def write(tmp_path: Path, text: str, roles: tuple[str, ...] = ("app",)) -> Path:
    for role in roles:
        (tmp_path / "roles" / role / "tasks").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "watches.yaml"
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None, **kwargs):
    path = write(tmp_path, text, **kwargs)
    return load_watches(path, env=env or {}, cwd=tmp_path)


def errors(tmp_path: Path, text: str, env: dict[str, str] | None = None, **kwargs) -> str:
    with pytest.raises(WatchesError) as info:
        load(tmp_path, text, env, **kwargs)
    return str(info.value)


BASIC = """\
- version: v1
  group: example.com
  kind: App
  role: app
"""


def test_defaults(tmp_path: Path) -> None:
    [watch] = load(tmp_path, BASIC)
    assert watch.gvk == GVK("example.com", "v1", "App")
    assert watch.role == (tmp_path / "roles" / "app").resolve()
    assert watch.playbook is None
    assert watch.vars == {}
    assert watch.max_runner_artifacts == 20
    assert watch.reconcile_period is None
    assert watch.manage_status is True
    assert watch.watch_dependent_resources is True
    assert watch.watch_cluster_scoped_resources is False
    assert watch.snake_case_parameters is True
    assert watch.watch_annotations_changes is False
    assert watch.mark_unsafe is True  # differs from Operator SDK on purpose (security)
    assert watch.blacklist == ()
    assert watch.selector is None
    assert watch.finalizer is None
    assert watch.watch_dependent_status is False
    assert watch.run_timeout is None
    assert watch.max_concurrent_reconciles is None
    assert watch.priority == 0
    assert watch.ansible_verbosity is None
    assert watch.source.endswith("watches.yaml:1")


def test_every_field(tmp_path: Path) -> None:
    [watch] = load(
        tmp_path,
        BASIC
        + """\
  vars:
    size: 3
    name: "{{ ansible_operator_meta.name }}"
  maxRunnerArtifacts: 5
  reconcilePeriod: 1h30m
  manageStatus: false
  watchDependentResources: false
  watchClusterScopedResources: true
  snakeCaseParameters: false
  watchAnnotationsChanges: true
  markUnsafe: true
  blacklist:
    - group: apps
      version: v1
      kind: Deployment
    - version: v1
      kind: ConfigMap
  selector:
    matchLabels:
      tier: web
    matchExpressions:
      - key: env
        operator: In
        values: [prod, staging]
  finalizer:
    name: example.com/cleanup
    vars:
      state: absent
  watchDependentStatus: true
  runTimeout: 10m
  maxConcurrentReconciles: 4
  priority: 50
""",
    )
    assert watch.vars == {"size": 3, "name": "{{ ansible_operator_meta.name }}"}
    assert watch.max_runner_artifacts == 5
    assert watch.reconcile_period == 5400.0
    assert watch.manage_status is False
    assert watch.watch_dependent_resources is False
    assert watch.watch_cluster_scoped_resources is True
    assert watch.snake_case_parameters is False
    assert watch.watch_annotations_changes is True
    assert watch.mark_unsafe is True
    assert watch.blacklist == (GVK("apps", "v1", "Deployment"), GVK("", "v1", "ConfigMap"))
    assert watch.selector == LabelSelector({"tier": "web"}, (("env", "In", ("prod", "staging")),))
    assert watch.finalizer is not None
    assert watch.finalizer.name == "example.com/cleanup"
    assert watch.finalizer.role is None and watch.finalizer.playbook is None
    assert watch.finalizer.vars == {"state": "absent"}
    assert watch.watch_dependent_status is True
    assert watch.run_timeout == 600.0
    assert watch.max_concurrent_reconciles == 4
    assert watch.priority == 50


def test_gvk_helpers() -> None:
    assert GVK("example.com", "v1", "App").api_version == "example.com/v1"
    assert GVK("", "v1", "Secret").api_version == "v1"
    assert GVK("cache.my-org.io", "v1", "Memcached").env_suffix == "MEMCACHED_CACHE_MY_ORG_IO"
    assert GVK("", "v1", "Secret").env_suffix == "SECRET_"
    assert "App" in str(GVK("example.com", "v1", "App"))
    assert "example.com/v1" in str(GVK("example.com", "v1", "App"))


def test_keys_are_case_insensitive(tmp_path: Path) -> None:
    [watch] = load(
        tmp_path,
        """\
- Version: v1
  GROUP: example.com
  kind: App
  Role: app
  reconcileperiod: 5m
  MANAGESTATUS: false
""",
    )
    assert watch.gvk == GVK("example.com", "v1", "App")
    assert watch.reconcile_period == 300.0
    assert watch.manage_status is False


def test_same_key_twice_in_different_case_is_an_error(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  Role: app\n")
    assert "watches.yaml:5:" in message
    assert "'Role'" in message and "line 4" in message


def test_env_expansion(tmp_path: Path) -> None:
    [watch] = load(
        tmp_path,
        """\
- version: $VERSION
  group: ${GROUP}
  kind: App
  role: ${ROLE}
  manageStatus: $MANAGE
  vars:
    where: "$PLACE and $UNKNOWN and ${ALSO_UNKNOWN}"
""",
        env={
            "VERSION": "v2",
            "GROUP": "example.com",
            "ROLE": "app",
            "MANAGE": "false",
            "PLACE": "here",
        },
    )
    assert watch.gvk == GVK("example.com", "v2", "App")
    assert watch.manage_status is False
    assert watch.vars == {"where": "here and $UNKNOWN and ${ALSO_UNKNOWN}"}


def test_env_defaults_to_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCH_KIND", "Thing")
    path = write(tmp_path, BASIC.replace("App", "$WATCH_KIND"))
    [watch] = load_watches(path, cwd=tmp_path)
    assert watch.gvk.kind == "Thing"


def test_unknown_key_names_line_and_suggests(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  vars: {}\n  reconcilePerid: 5m\n")
    assert message.endswith(
        "watches.yaml:6: unknown key 'reconcilePerid' (did you mean 'reconcilePeriod'?)"
    )
    assert str(tmp_path / "watches.yaml") in message


def test_a_misspelt_priority_is_named_with_the_key_meant(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  priorty: 10\n")
    assert message.endswith("watches.yaml:5: unknown key 'priorty' (did you mean 'priority'?)")


def test_unknown_key_without_close_match_lists_known_keys(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  zzz: 1\n")
    assert "watches.yaml:5: unknown key 'zzz'" in message
    assert "reconcilePeriod" in message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('  manageStatus: "yes"', "'manageStatus' must be true or false, not 'yes'"),
        ("  markUnsafe: 1", "'markUnsafe' must be true or false, not 1"),
        ("  maxRunnerArtifacts: many", "'maxRunnerArtifacts' must be an integer, not 'many'"),
        ("  maxRunnerArtifacts: -1", "'maxRunnerArtifacts' must be at least 0, not -1"),
        ("  maxConcurrentReconciles: 0", "'maxConcurrentReconciles' must be positive, not 0"),
        ("  priority: high", "'priority' must be an integer, not 'high'"),
        ("  priority: 1001", "'priority' must be at most 1000, not 1001"),
        ("  priority: -1001", "'priority' must be at least -1000, not -1001"),
        ("  reconcilePeriod: soon", "'reconcilePeriod': invalid duration 'soon'"),
        ("  runTimeout: '30'", "'runTimeout': invalid duration '30'"),
        ("  vars: [a, b]", "'vars' must be a mapping, not a list"),
        ("  blacklist: Deployment", "'blacklist' must be a list of {group, version, kind}"),
        ("  selector: app=web", "'selector' must be a mapping, not 'app=web'"),
    ],
)
def test_wrong_types(tmp_path: Path, line: str, expected: str) -> None:
    message = errors(tmp_path, BASIC + line + "\n")
    assert f"watches.yaml:5: {expected}" in message


def test_integer_durations_are_seconds(tmp_path: Path) -> None:
    [watch] = load(tmp_path, BASIC + "  reconcilePeriod: 90\n  runTimeout: 0\n")
    assert watch.reconcile_period == 90.0
    assert watch.run_timeout is None


def test_zero_reconcile_period_means_use_the_flag(tmp_path: Path) -> None:
    [watch] = load(tmp_path, BASIC + "  reconcilePeriod: 0s\n")
    assert watch.reconcile_period is None


def test_required_fields(tmp_path: Path) -> None:
    message = errors(tmp_path, "- group: example.com\n  role: app\n")
    assert "watches.yaml:1: watch: 'version' is required" in message
    assert "watches.yaml:1: watch: 'kind' is required" in message


def test_needs_role_or_playbook(tmp_path: Path) -> None:
    message = errors(tmp_path, "- version: v1\n  kind: App\n")
    assert "watches.yaml:1: watch: needs a 'role' or a 'playbook'" in message


def test_empty_group_is_core(tmp_path: Path) -> None:
    [watch] = load(tmp_path, '- version: v1\n  group: ""\n  kind: Secret\n  role: app\n')
    assert watch.gvk == GVK("", "v1", "Secret")
    assert watch.gvk.api_version == "v1"


def test_duplicate_gvk_names_both_lines(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + BASIC.replace("role: app", "role: app\n  vars: {}"))
    assert "watches.yaml:5: duplicate watch for" in message
    assert "App" in message
    assert "watches.yaml:1" in message


def test_all_errors_reported_together(tmp_path: Path) -> None:
    message = errors(
        tmp_path,
        BASIC + "  manageStatus: maybe\n- version: v1\n  kind: Other\n  role: nope\n  bogus: 1\n",
    )
    lines = message.splitlines()
    assert len(lines) == 3
    assert lines[0].endswith("watches.yaml:5: 'manageStatus' must be true or false, not 'maybe'")
    assert any(":8: 'role': role 'nope' not found" in line for line in lines)
    assert any(":9: unknown key 'bogus'" in line for line in lines)


def test_invalid_yaml(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  vars: {a: [\n")
    assert message.startswith(str(tmp_path / "watches.yaml"))
    assert "invalid YAML" in message


def test_an_unclosed_bracket_is_reported_where_it_opened(tmp_path: Path) -> None:
    text = BASIC + "  vars: {a: [\n"
    opened = text.count("\n")  # the last line opens what the end of file never closes
    message = errors(tmp_path, text)
    assert f"watches.yaml:{opened}: invalid YAML" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("version: v1\nkind: App\n", ":1: expected a list of watches"),
        ("- just a string\n", ":1: each watch must be a mapping, not 'just a string'"),
        ("", ":1: the file is empty"),
    ],
)
def test_top_level_shape(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in errors(tmp_path, text)


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_watches(tmp_path / "nope.yaml", env={}, cwd=tmp_path)


def test_missing_role_lists_where_it_looked(tmp_path: Path) -> None:
    roles_path = tmp_path / "shared"
    roles_path.mkdir()
    message = errors(
        tmp_path,
        BASIC.replace("role: app", "role: missing"),
        {"ANSIBLE_ROLES_PATH": str(roles_path)},
    )
    assert "watches.yaml:4: 'role': role 'missing' not found; looked in:" in message
    assert str(roles_path / "missing") in message
    assert str(roles_path / "roles" / "missing") not in message  # shared/roles does not exist
    assert str(tmp_path / "roles" / "missing") in message


def make_role(path: Path) -> Path:
    (path / "tasks").mkdir(parents=True)
    return path


def test_role_absolute_path(tmp_path: Path) -> None:
    role = make_role(tmp_path / "elsewhere" / "myrole")
    [watch] = load(tmp_path, BASIC.replace("role: app", f"role: {role}"))
    assert watch.role == role.resolve()
    message = errors(tmp_path, BASIC.replace("role: app", f"role: {tmp_path / 'gone'}"))
    assert "role" in message and str(tmp_path / "gone") in message


def test_role_fqcn_in_collections_path(tmp_path: Path) -> None:
    collections = tmp_path / "collections"
    role = make_role(collections / "ansible_collections" / "my" / "coll" / "roles" / "app")
    make_role(tmp_path / "other" / "app")  # a roles-path candidate that must lose
    env = {
        "ANSIBLE_COLLECTIONS_PATH": f"{tmp_path / 'empty'}:{collections}",
        "ANSIBLE_ROLES_PATH": str(tmp_path / "other"),
    }
    [watch] = load(tmp_path, BASIC.replace("role: app", "role: my.coll.app"), env)
    assert watch.role == role.resolve()


def test_role_fqcn_with_ansible_collections_dir_and_old_variable(tmp_path: Path) -> None:
    collections = tmp_path / "collections" / "ansible_collections"
    role = make_role(collections / "my" / "coll" / "roles" / "app")
    env = {"ANSIBLE_COLLECTIONS_PATHS": str(collections)}
    [watch] = load(tmp_path, BASIC.replace("role: app", "role: my.coll.app"), env)
    assert watch.role == role.resolve()


def test_role_roles_path_before_cwd_roles(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    direct = make_role(shared / "app")
    env = {"ANSIBLE_ROLES_PATH": f"{tmp_path / 'nothing'}:{shared}"}
    [watch] = load(tmp_path, BASIC, env)  # ./roles/app exists too, but loses
    assert watch.role == direct.resolve()


def test_role_roles_path_roles_subdir(tmp_path: Path) -> None:
    nested = make_role(tmp_path / "shared" / "roles" / "app")
    env = {"ANSIBLE_ROLES_PATH": str(tmp_path / "shared")}
    [watch] = load(tmp_path, BASIC, env)
    assert watch.role == nested.resolve()


def test_role_cwd_roles_then_relative_path(tmp_path: Path) -> None:
    [watch] = load(tmp_path, BASIC)
    assert watch.role == (tmp_path / "roles" / "app").resolve()
    relative = make_role(tmp_path / "custom" / "thing")
    [watch] = load(tmp_path, BASIC.replace("role: app", "role: custom/thing"))
    assert watch.role == relative.resolve()


def test_playbook(tmp_path: Path) -> None:
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "site.yml").write_text("- hosts: localhost\n")
    [watch] = load(tmp_path, BASIC + "  playbook: playbooks/site.yml\n")
    assert watch.playbook == (tmp_path / "playbooks" / "site.yml").resolve()
    assert watch.role is None  # playbook wins, no error


def test_playbook_relative_to_watches_dir(tmp_path: Path) -> None:
    operator = tmp_path / "operator"
    (operator / "playbooks").mkdir(parents=True)
    (operator / "playbooks" / "site.yml").write_text("- hosts: localhost\n")
    path = operator / "watches.yaml"
    path.write_text("- version: v1\n  kind: App\n  playbook: playbooks/site.yml\n")
    [watch] = load_watches(path, env={}, cwd=tmp_path)
    assert watch.playbook == (operator / "playbooks" / "site.yml").resolve()


def test_missing_playbook(tmp_path: Path) -> None:
    message = errors(tmp_path, "- version: v1\n  kind: App\n  playbook: nope.yml\n")
    assert "watches.yaml:3: 'playbook': playbook 'nope.yml' not found" in message


def test_finalizer_with_role(tmp_path: Path) -> None:
    [watch] = load(
        tmp_path,
        BASIC + "  finalizer:\n    name: example.com/fin\n    role: cleanup\n",
        roles=("app", "cleanup"),
    )
    assert watch.finalizer is not None
    assert watch.finalizer.role == (tmp_path / "roles" / "cleanup").resolve()
    assert watch.finalizer.playbook is None


def test_finalizer_with_playbook(tmp_path: Path) -> None:
    (tmp_path / "fin.yml").write_text("- hosts: localhost\n")
    [watch] = load(
        tmp_path,
        BASIC + "  finalizer:\n    name: fin\n    playbook: fin.yml\n    vars: {x: 1}\n",
    )
    assert watch.finalizer is not None
    assert watch.finalizer.playbook == (tmp_path / "fin.yml").resolve()
    assert watch.finalizer.vars == {"x": 1}


def test_a_playbook_wins_and_the_role_beside_it_is_not_looked_up(tmp_path: Path) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    fin = "  finalizer:\n    name: fin\n    playbook: site.yml\n    role: nope\n"
    [watch] = load(tmp_path, BASIC.replace("role: app", "role: nope\n  playbook: site.yml") + fin)
    assert watch.playbook == watch.finalizer.playbook == (tmp_path / "site.yml").resolve()
    assert watch.role is None and watch.finalizer.role is None


def test_finalizer_missing_playbook_names_the_finalizer_key(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  finalizer:\n    name: fin\n    playbook: gone.yml\n")
    assert "watches.yaml:7: 'finalizer.playbook': playbook 'gone.yml' not found" in message


def test_verbosity_comes_from_the_environment_only(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  ansibleVerbosity: 3\n")
    assert "watches.yaml:5: unknown key 'ansibleVerbosity'" in message


def test_finalizer_errors(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  finalizer:\n    role: nope\n    nmae: x\n")
    assert "watches.yaml:6: finalizer: 'name' is required" in message
    assert "watches.yaml:6: 'finalizer.role': role 'nope' not found" in message
    assert "watches.yaml:7: finalizer: unknown key 'nmae' (did you mean 'name'?)" in message
    message = errors(tmp_path, BASIC + "  finalizer:\n    name: only-a-name\n")
    assert "watches.yaml:6: finalizer: needs a 'role', a 'playbook' or 'vars'" in message


def test_env_overrides(tmp_path: Path) -> None:
    env = {
        "MAX_CONCURRENT_RECONCILES_APP_EXAMPLE_COM": "3",
        "ANSIBLE_VERBOSITY_APP_EXAMPLE_COM": "4",
    }
    [watch] = load(tmp_path, BASIC + "  maxConcurrentReconciles: 9\n", env)
    assert watch.max_concurrent_reconciles == 3
    assert watch.ansible_verbosity == 4


def test_env_override_old_worker_name_and_core_suffix(tmp_path: Path) -> None:
    text = '- version: v1\n  group: ""\n  kind: Secret\n  role: app\n'
    [watch] = load(tmp_path, text, {"WORKER_SECRET_": "2"})
    assert watch.max_concurrent_reconciles == 2
    both = {"MAX_CONCURRENT_RECONCILES_SECRET_": "5", "WORKER_SECRET_": "2"}
    [watch] = load(tmp_path, text, both)
    assert watch.max_concurrent_reconciles == 5


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MAX_CONCURRENT_RECONCILES_APP_EXAMPLE_COM", "0"),
        ("WORKER_APP_EXAMPLE_COM", "lots"),
        ("ANSIBLE_VERBOSITY_APP_EXAMPLE_COM", "8"),
        ("ANSIBLE_VERBOSITY_APP_EXAMPLE_COM", "loud"),
    ],
)
def test_bad_env_overrides_name_the_variable(tmp_path: Path, variable: str, value: str) -> None:
    message = errors(tmp_path, BASIC, {variable: value})
    assert f"watches.yaml:1: environment variable {variable}" in message
    assert repr(value) in message


def test_selector_query_and_matches() -> None:
    selector = LabelSelector(
        {"a": "b"},
        (
            ("c", "In", ("x", "y")),
            ("d", "NotIn", ("z",)),
            ("e", "Exists", ()),
            ("f", "DoesNotExist", ()),
        ),
    )
    assert selector.to_query() == "a=b,c in (x,y),d notin (z),e,!f"
    assert selector.matches({"a": "b", "c": "x", "e": "1"})
    assert selector.matches({"a": "b", "c": "y", "d": "w", "e": ""})
    assert not selector.matches({"a": "other", "c": "x", "e": "1"})
    assert not selector.matches({"a": "b", "c": "q", "e": "1"})
    assert not selector.matches({"a": "b", "c": "x", "d": "z", "e": "1"})
    assert not selector.matches({"a": "b", "c": "x"})
    assert not selector.matches({"a": "b", "c": "x", "e": "1", "f": "1"})


def test_selector_errors(tmp_path: Path) -> None:
    message = errors(
        tmp_path,
        BASIC
        + """\
  selector:
    matchLabels:
      version: 2
    matchExpressions:
      - key: env
        operator: Equals
        values: [a]
      - key: tier
        operator: In
    matchLabel: {}
""",
    )
    assert "watches.yaml:7: 'matchLabels': value of 'version' must be a string" in message
    assert "watches.yaml:10: 'operator' must be one of In, NotIn, Exists, DoesNotExist" in message
    assert "watches.yaml:12: 'matchExpressions' entry: operator In needs 'values'" in message
    assert "watches.yaml:14: selector: unknown key 'matchLabel' (did you mean 'matchLabels'?)" in (
        message
    )


def test_blacklist_errors(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  blacklist:\n    - group: apps\n      kind: Deployment\n")
    assert "watches.yaml:6: blacklist entry: 'version' is required" in message


def test_repo_test_operator_loads() -> None:
    watches = load_watches(REPO_OPERATOR / "watches.yaml", env={}, cwd=REPO_OPERATOR)
    by_kind = {w.gvk.kind: w for w in watches}
    assert set(by_kind) == {"Greeting", "Broken", "Secret", "Stack"}
    greeting = by_kind["Greeting"]
    assert greeting.role == REPO_OPERATOR / "roles" / "greeting"
    assert greeting.reconcile_period == 3600.0
    assert greeting.vars == {"greeting_suffix": "!"}
    assert greeting.finalizer is not None
    assert greeting.finalizer.role == REPO_OPERATOR / "roles" / "greeting_cleanup"
    assert by_kind["Broken"].playbook == REPO_OPERATOR / "playbooks" / "broken.yml"
    secret = by_kind["Secret"]
    assert secret.gvk == GVK("", "v1", "Secret")
    assert secret.manage_status is False
    assert secret.selector is not None and secret.selector.to_query() == "app=mirror-me"
    assert by_kind["Stack"].watch_cluster_scoped_resources is True


def laughs(levels: int, indent: str) -> list[str]:
    """Mapping entries whose aliases nest `levels` deep: 9**levels values from
    a few hundred bytes (7 levels: 4.8 million; 9: 387 million)."""
    lines = [f'{indent}l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"{indent}l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    return lines


def test_a_yaml_alias_bomb_in_vars_is_refused_at_once_naming_its_line(tmp_path: Path) -> None:
    text = BASIC + "  vars:\n" + "\n".join(laughs(7, "    ")) + "\n"
    assert len(text) < 1000
    message = errors(tmp_path, text)
    assert "YAML aliases expand the file by more than" in message
    # At the first alias that takes the expansion past the bound.
    path, line, _ = message.split(":", 2)
    assert path == str(tmp_path / "watches.yaml")
    assert "*l" in text.splitlines()[int(line) - 1]


def test_an_alias_bomb_outside_any_vars_is_refused_too(tmp_path: Path) -> None:
    text = BASIC + "- " + "\n".join(laughs(7, "  "))[2:] + "\n"
    assert "YAML aliases expand the file by more than" in errors(tmp_path, text)


def test_a_recursive_alias_is_refused_naming_its_line(tmp_path: Path) -> None:
    message = errors(tmp_path, BASIC + "  vars:\n    loop: &loop [1, *loop]\n")
    assert message == (
        f"{tmp_path / 'watches.yaml'}:6: alias *loop is inside the value it names "
        "(a recursive alias)"
    )


def test_aliases_that_share_a_block_still_load_and_expand_once(tmp_path: Path) -> None:
    text = (
        "- version: v1\n  group: example.com\n  kind: App\n  role: app\n"
        "  vars: &shared\n    home: $HOME\n    size: 3\n"
        "- version: v1\n  group: example.com\n  kind: Other\n  role: app\n"
        "  vars: *shared\n"
    )
    # $HOME's value holds a '$': expanded once, not again through the alias.
    app, other = load(tmp_path, text, env={"HOME": "/home/$USER"})
    assert app.vars == other.vars == {"home": "/home/$USER", "size": 3}


@pytest.mark.parametrize("period", ["1ms", "0.001", "500ms"])
def test_a_reconcile_period_below_the_floor_is_raised_to_it_with_a_warning(
    tmp_path: Path, period: str, caplog: pytest.LogCaptureFixture
) -> None:
    [watch] = load(tmp_path, BASIC + f"  reconcilePeriod: {period}\n")
    assert watch.reconcile_period == 1.0
    assert f"{tmp_path / 'watches.yaml'}:5: 'reconcilePeriod'" in caplog.text
    assert "below the floor of 1s" in caplog.text

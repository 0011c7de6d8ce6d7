"""Release pipeline: ship a service through an ordered CI/CD workflow whose steps feed each other.

The workflow is the one release engineers follow: find the newest commit on ``main`` that passes the test
suite, build an artifact from it, deploy the artifact to staging, smoke-test that deployment, tag the release
with the right semantic version, and only then deploy the same artifact to production. Each step consumes an
identifier produced by an earlier one (commit -> artifact -> staging deployment -> release -> production
deployment) and the pipeline refuses steps taken out of order, with an error saying what is missing. Harder
levels put failing commits on top of ``main``, add the version bump, and include a database migration that
must be applied in each environment before the deploy. The final production state is checked.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action

ENVIRONMENTS = ("staging", "production")
_SERVICES = (
    "billing-api",
    "search-indexer",
    "notification-hub",
    "ledger-sync",
    "media-transcoder",
    "auth-gateway",
)
_MESSAGES = (
    "fix rounding in invoice totals", "bump http client", "add retry to webhook sender", "refactor loader",
    "cache tenant lookups", "tighten input validation", "log request ids", "speed up cold start",
    "drop legacy v1 endpoint", "add metrics for queue depth", "handle empty payloads", "update dependencies",
)  # fmt: skip
_AUTHORS = ("mhughes", "aokoye", "lchen", "pdubois", "skarlsson", "rnair", "tbaptiste")
_TESTS = (
    "test_refund_flow",
    "test_pagination",
    "test_timezone_edges",
    "test_auth_expiry",
    "test_bulk_import",
)


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value.strip().lower()


def _bump(version: str, part: str) -> str:
    major, minor, patch = (int(x) for x in version.lstrip("v").split("."))
    if part == "major":
        return f"v{major + 1}.0.0"
    if part == "minor":
        return f"v{major}.{minor + 1}.0"
    return f"v{major}.{minor}.{patch + 1}"


class ReleasePipelineEnv(ToolEnv):
    """Ship the newest green commit to production: test, build, stage, smoke-test, tag and deploy, in order.

    Level 0: the head of main is green and production needs only a smoke-tested staging deploy. Level 1:
    the head is red and production also needs a release tag with a semantic-version bump. Level 2: two red
    commits on top and a database migration to apply in each environment before deploying there.
    """

    skill = "multi_step_workflows"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 20
    tools: ClassVar[list[dict[str, Any]]] = [
        function_schema("list_commits", "Recent commits of a branch, newest first.",
                        branch=("string", "Branch name, e.g. main")),
        function_schema("run_tests", "Run the test suite on a commit.", commit=("string", "Commit sha")),
        function_schema("build_artifact", "Build a deployable artifact from a commit whose tests passed.",
                        commit=("string", "Commit sha")),
        function_schema("run_migration", "Apply a database migration in an environment.",
                        environment=("string", "staging | production"),
                        migration=("string", "Migration id, e.g. 0042")),
        function_schema("deploy", "Deploy an artifact to an environment; returns a deployment id.",
                        artifact_id=("string", "Artifact id"), environment=("string", "staging|production")),
        function_schema("run_smoke_test", "Smoke-test a staging deployment.",
                        deployment_id=("string", "Deployment id")),
        function_schema("get_latest_release", "The most recent release tag of the service."),
        function_schema("create_release", "Tag an artifact as a release with a version vMAJOR.MINOR.PATCH.",
                        artifact_id=("string", "Artifact id"), version=("string", "e.g. v2.4.0")),
        function_schema("rollback", "Roll an environment back to its previous deployment.",
                        environment=("string", "staging | production")),
        function_schema("get_deploy_logs", "Logs of a deployment.", deployment_id=("string", "Deployment")),
    ]  # fmt: skip

    # -- world ------------------------------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        self.service = rng.choice(_SERVICES)
        shas = [f"{rng.randrange(16**7):07x}" for _ in range(8)]
        red = (0, 1, 2)[self.difficulty]
        self.commits: list[dict[str, Any]] = [
            {"sha": sha, "message": rng.choice(_MESSAGES), "author": rng.choice(_AUTHORS),
             "failing": rng.choice(_TESTS) if i < red else None}
            for i, sha in enumerate(dict.fromkeys(shas))
        ]  # fmt: skip
        self.candidate = self.commits[red]["sha"]
        self.migration: str | None = f"{rng.randint(30, 99):04d}" if self.difficulty == 2 else None
        if self.migration:
            self.commits[red]["message"] += f" (requires migration {self.migration})"
        self.latest = f"v{rng.randint(1, 4)}.{rng.randint(0, 12)}.{rng.randint(0, 9)}"
        self.bump_part = rng.choice(("major", "minor", "patch"))
        self.version = _bump(self.latest, self.bump_part)
        self.tested: dict[str, bool] = {}
        self.artifacts: dict[str, dict[str, Any]] = {}
        self.deployments: dict[str, dict[str, Any]] = {}
        self.history: dict[str, list[str]] = {env: [] for env in ENVIRONMENTS}
        self.migrated: dict[str, bool] = dict.fromkeys(ENVIRONMENTS, False)
        self.releases: dict[str, str] = {}
        self._next_build, self._next_deploy = rng.randint(100, 900), rng.randrange(10000, 90000)
        return self._intro(), {"difficulty": self.difficulty}

    def _intro(self) -> str:
        gate = (
            "Production only accepts an artifact whose staging deployment passed the smoke test."
            if self.difficulty == 0
            else "Production only accepts an artifact whose staging deployment passed the smoke test and "
            f"that is tagged as a release; this is a {self.bump_part} release (bump the latest tag)."
        )
        lines = [
            f"Release duty for {self.service}: ship the newest commit on main that passes the test suite to "
            f"production. {gate} Answer with the production deployment id.",
            "",
            "Tools:",
        ]
        for schema in self.tools:
            fn = schema["function"]
            lines.append(f"- {fn['name']}({', '.join(fn['parameters']['properties'])}): {fn['description']}")
        lines += [
            "",
            'Call tools with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>'
            " (one or more per turn).",
            "Finish with <answer>DEPLOYMENT_ID</answer>; your first answer ends the episode.",
        ]
        return "\n".join(lines)

    def _commit(self, value: object) -> dict[str, Any]:
        sha = _text(value, "commit")
        for commit in self.commits:
            if len(sha) >= 4 and commit["sha"].startswith(sha):
                return commit
        raise ValueError(f"unknown commit {sha!r}; list_commits shows the shas")

    def _environment(self, value: object) -> str:
        env = _text(value, "environment")
        if env not in ENVIRONMENTS:
            raise ValueError("environment must be staging or production")
        return env

    # -- tools ------------------------------------------------------------------------------------------
    def tool_list_commits(self, branch: object) -> str:
        name = _text(branch, "branch")
        if name != "main":
            return f"Error: branch {name!r} has no pipeline; releases ship from main."
        rows = [f"{c['sha']} {c['message']} ({c['author']})" for c in self.commits]
        return f"{self.service} main, newest first:\n" + "\n".join(rows)

    def tool_run_tests(self, commit: object) -> str:
        c = self._commit(commit)
        self.tested[c["sha"]] = c["failing"] is None
        if c["failing"]:
            return f"Tests on {c['sha']}: FAILED ({c['failing']}); 1 failure, 211 passed."
        return f"Tests on {c['sha']}: PASSED (212 passed)."

    def tool_build_artifact(self, commit: object) -> str:
        c = self._commit(commit)
        if c["sha"] not in self.tested:
            return f"Error: no test run for {c['sha']}; run the tests first."
        if not self.tested[c["sha"]]:
            return f"Error: tests failed on {c['sha']}; refusing to build."
        aid = f"art-{c['sha']}-{self._next_build}"
        self._next_build += 1
        self.artifacts[aid] = {"commit": c["sha"], "verified": False}
        return f"Built artifact {aid} from {c['sha']}."

    def tool_run_migration(self, environment: object, migration: object) -> str:
        env, mid = self._environment(environment), _text(migration, "migration").zfill(4)
        if mid != self.migration:
            return f"Error: no pending migration {mid}."
        if env == "production" and not self.migrated["staging"]:
            return "Error: apply migrations to staging before production."
        self.migrated[env] = True
        return f"Migration {mid} applied to {env}."

    def tool_deploy(self, artifact_id: object, environment: object) -> str:
        aid, env = _text(artifact_id, "artifact_id"), self._environment(environment)
        artifact = self.artifacts.get(aid)
        if artifact is None:
            return f"Error: no artifact {aid}; build one first."
        if self.migration and artifact["commit"] == self.candidate and not self.migrated[env]:
            return f"Error: deploy blocked, migration {self.migration} is pending in {env}."
        if env == "production":
            if not artifact["verified"]:
                return "Error: production needs an artifact whose staging deployment passed the smoke test."
            if self.difficulty > 0 and aid not in self.releases.values():
                return "Error: production needs a release tag on this artifact (create_release)."
        did = f"dep-{self._next_deploy}"
        self._next_deploy += 1
        self.deployments[did] = {"artifact": aid, "environment": env}
        self.history[env].append(did)
        return f"Deployed {aid} to {env} as {did}."

    def tool_run_smoke_test(self, deployment_id: object) -> str:
        did = _text(deployment_id, "deployment_id")
        dep = self.deployments.get(did)
        if dep is None:
            return f"Error: no deployment {did}."
        if dep["environment"] != "staging" or self.history["staging"][-1:] != [did]:
            return f"Error: {did} is not the live staging deployment."
        self.artifacts[dep["artifact"]]["verified"] = True
        return f"Smoke test on {did}: PASSED (18/18 checks)."

    def tool_get_latest_release(self) -> str:
        return f"Latest release of {self.service}: {self.latest}"

    def tool_create_release(self, artifact_id: object, version: object) -> str:
        aid, tag = _text(artifact_id, "artifact_id"), _text(version, "version")
        tag = tag if tag.startswith("v") else f"v{tag}"
        parts = tag[1:].split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            return "Error: version must look like vMAJOR.MINOR.PATCH."
        if aid not in self.artifacts:
            return f"Error: no artifact {aid}."
        if not self.artifacts[aid]["verified"]:
            return "Error: only artifacts that passed the staging smoke test can be released."
        if tuple(map(int, parts)) <= tuple(map(int, self.latest[1:].split("."))):
            return f"Error: {tag} is not newer than {self.latest}."
        self.releases[tag] = aid
        self.latest = tag
        return f"Released {aid} as {tag}."

    def tool_rollback(self, environment: object) -> str:
        env = self._environment(environment)
        if not self.history[env]:
            return f"Error: nothing to roll back in {env}."
        gone = self.history[env].pop()
        now = self.history[env][-1] if self.history[env] else "the previous release"
        return f"Rolled back {env}: {gone} removed, now serving {now}."

    def tool_get_deploy_logs(self, deployment_id: object) -> str:
        did = _text(deployment_id, "deployment_id")
        dep = self.deployments.get(did)
        if dep is None:
            return f"Error: no deployment {did}."
        return f"{did}: pulled {dep['artifact']}, 3/3 instances healthy in {dep['environment']}."

    # -- verdict ----------------------------------------------------------------------------------------
    def check_answer(self, answer: str) -> bool:
        if not self.history["production"]:
            return False
        live = self.history["production"][-1]
        aid = self.deployments[live]["artifact"]
        if self.artifacts[aid]["commit"] != self.candidate:
            return False
        if self.difficulty > 0 and self.releases.get(self.version) != aid:
            return False
        return answer.strip().lower() == live

    def solution(self) -> list[str]:
        red = [c["sha"] for c in self.commits[: self.commits.index(self._commit(self.candidate)) + 1]]
        aid = f"art-{self.candidate}-{self._next_build}"
        staging, production = f"dep-{self._next_deploy}", f"dep-{self._next_deploy + 1}"
        steps = [tool_call_action("list_commits", branch="main")]
        steps += [tool_call_action("run_tests", commit=sha) for sha in red]
        steps.append(tool_call_action("build_artifact", commit=self.candidate))
        if self.migration:
            steps.append(tool_call_action("run_migration", environment="staging", migration=self.migration))
        steps.append(tool_call_action("deploy", artifact_id=aid, environment="staging"))
        steps.append(tool_call_action("run_smoke_test", deployment_id=staging))
        if self.difficulty > 0:
            steps.append(tool_call_action("get_latest_release"))
            steps.append(tool_call_action("create_release", artifact_id=aid, version=self.version))
        if self.migration:
            steps.append(
                tool_call_action("run_migration", environment="production", migration=self.migration)
            )
        steps.append(tool_call_action("deploy", artifact_id=aid, environment="production"))
        return [*steps, answer_action(production)]

    def sample_action(self, rng: random.Random) -> str:
        """A random plausible action: a pipeline step on random ids, or a guessed deployment id."""
        if rng.random() < 0.15:
            return answer_action(rng.choice([*self.deployments, f"dep-{self._next_deploy}"]))
        sha = rng.choice(self.commits)["sha"]
        aid = rng.choice([*self.artifacts, f"art-{sha}-{self._next_build}"])
        did = rng.choice([*self.deployments, f"dep-{self._next_deploy}"])
        env = rng.choice(ENVIRONMENTS)
        version = _bump(self.latest, rng.choice(("major", "minor", "patch")))
        calls: tuple[tuple[str, dict[str, Any]], ...] = (
            ("list_commits", {"branch": "main"}), ("run_tests", {"commit": sha}),
            ("build_artifact", {"commit": sha}), ("deploy", {"artifact_id": aid, "environment": env}),
            ("run_migration", {"environment": env, "migration": self.migration or "0001"}),
            ("run_smoke_test", {"deployment_id": did}), ("get_latest_release", {}),
            ("create_release", {"artifact_id": aid, "version": version}), ("rollback", {"environment": env}),
            ("get_deploy_logs", {"deployment_id": did}),
        )  # fmt: skip
        name, args = rng.choice(calls)
        return tool_call_action(name, **args)


ENV = ReleasePipelineEnv

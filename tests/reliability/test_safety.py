"""Safety: argument lists (never a shell), trust_remote_code off by default, SHA-256 manifests,
servers on 127.0.0.1, and secrets masked in everything servetune logs or sends to MLflow."""

from __future__ import annotations

import ast
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from tuner.common.errors import EngineStartError, SpecError
from tuner.common.redact import redact, redact_text
from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.engines.process import reserve_port
from tuner.run.preflight import verify_manifest
from tuner.spec.study import EngineSettings, ModelSpec, SimSettings

ROOT = Path(__file__).resolve().parents[2]
EVIL = "16; touch {marker} && echo pwned $(touch {marker}2) `touch {marker}3`"


def launch(engine: str, tmp: Path, **model: object) -> LaunchSpec:
    settings = SimSettings(time_scale=50) if engine == "sim" else EngineSettings(check_args=False)
    spec = ModelSpec(**{"name": "Qwen/Qwen3-0.6B", "max_model_len": 2048, **model})
    return LaunchSpec(model=spec, host=settings.host if isinstance(settings, EngineSettings) else "127.0.0.1",
                      port=8123, log_path=tmp / "engine.log", settings=settings)


# ---- argument lists, no shell ------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["vllm", "sglang", "sim"])
def test_a_shell_string_in_a_config_stays_one_argument(engine: str, tmp_path: Path) -> None:
    evil = EVIL.format(marker=tmp_path / "pwned")
    argv = get_engine(engine).argv({"max_num_seqs": evil}, launch(engine, tmp_path))
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    i = argv.index("--max-num-seqs")
    assert argv[i + 1] == evil, "the value must be one argv element, untouched"


def test_a_shell_string_is_never_executed_by_a_launch(tmp_path: Path) -> None:
    """A real launch of the sim engine with shell syntax in a value and in the served name: nothing runs it."""
    marker = tmp_path / "pwned"
    engine = get_engine("sim")
    spec = launch("sim", tmp_path, served_name=f"m$(touch {marker}4)")
    port, sock = reserve_port()
    spec.port, spec.port_socket = port, sock
    spec.settings = SimSettings(time_scale=50)
    with pytest.raises(EngineStartError) as err:  # "16; touch ..." is not a number: the server refuses it
        with engine.server({"max_num_seqs": EVIL.format(marker=marker)}, spec):
            pass
    assert err.value.outcome == "start_failed", err.value.reason
    assert not list(tmp_path.glob("pwned*")), "a shell ran part of the config"
    header = (tmp_path / "engine.log").read_text().splitlines()[0]
    assert f"'{EVIL.format(marker=marker)}'" in header, header  # logged quoted, as the one argument it was


def _shell_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name in ("os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput", "commands.getoutput"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}(shell=...)")
    return found


def test_no_code_path_uses_a_shell() -> None:
    files = [p for d in ("tuner", "serve_apps", "benchmarks", "scripts") for p in (ROOT / d).rglob("*.py")]
    assert len(files) > 20
    assert [c for f in files for c in _shell_calls(f)] == []


# ---- trust_remote_code -------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_trust_remote_code_is_off_unless_the_study_says_so(engine: str, tmp_path: Path) -> None:
    e = get_engine(engine)
    assert ModelSpec(name="x").trust_remote_code is False
    assert "--trust-remote-code" not in e.argv({}, launch(engine, tmp_path))
    assert "--trust-remote-code" in e.argv({}, launch(engine, tmp_path, trust_remote_code=True))
    with pytest.raises(SpecError, match="trust_remote_code"):  # a search space cannot turn it on
        e.check_args({"trust_remote_code": True})
    with pytest.raises(SpecError):  # nor smuggle it in through an argument name
        e.argv({"max_num_seqs --trust-remote-code": 1}, launch(engine, tmp_path))


def test_no_shipped_study_trusts_remote_code() -> None:
    import yaml

    for f in (ROOT / "studies").glob("*.yaml"):
        data = yaml.safe_load(f.read_text()) or {}
        assert not (data.get("model") or {}).get("trust_remote_code"), f


# ---- SHA-256 manifest --------------------------------------------------------------------------
def _model(tmp: Path) -> tuple[Path, Path]:
    d = tmp / "model"
    (d / "sub").mkdir(parents=True)
    (d / "config.json").write_text('{"hidden_size": 8}')
    (d / "sub" / "weights.safetensors").write_bytes(bytes(range(256)) * 4096)
    sha = shutil.which("sha256sum")
    if sha:  # the manifest a user makes: real sha256sum output (binary-mode '*' marker included)
        text = subprocess.run([sha, "config.json"], cwd=d, capture_output=True, text=True, check=True).stdout
        text += subprocess.run([sha, "-b", "sub/weights.safetensors"], cwd=d, capture_output=True, text=True,
                               check=True).stdout
    else:
        text = "".join(f"{hashlib.sha256((d / n).read_bytes()).hexdigest()}  {n}\n"
                       for n in ("config.json", "sub/weights.safetensors"))
    manifest = tmp / "model.sha256"
    manifest.write_text("# made with sha256sum\n" + text)
    return d, manifest


def test_manifest_accepts_intact_files_and_catches_one_changed_byte(tmp_path: Path) -> None:
    d, manifest = _model(tmp_path)
    verify_manifest(d, manifest)  # intact: no error
    w = d / "sub" / "weights.safetensors"
    data = bytearray(w.read_bytes())
    data[len(data) // 2] ^= 1
    w.write_bytes(bytes(data))
    with pytest.raises(SpecError) as err:
        verify_manifest(d, manifest)
    assert "sub/weights.safetensors does not match" in err.value.what and err.value.where.endswith("model.sha256:3")


def test_manifest_catches_a_missing_file(tmp_path: Path) -> None:
    d, manifest = _model(tmp_path)
    (d / "config.json").unlink()
    with pytest.raises(SpecError, match="config.json listed in the manifest is missing"):
        verify_manifest(d, manifest)


# ---- 127.0.0.1 ---------------------------------------------------------------------------------
def _listening(port: int) -> set[str]:
    """Local addresses with a socket listening on `port`, from /proc/net/tcp{,6}."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.rsplit(":", 1)
            if state == "0A" and int(p, 16) == port:
                out.add(addr)
    return out


def test_servers_bind_loopback_by_default(tmp_path: Path) -> None:
    assert EngineSettings().host == "127.0.0.1"
    for engine in ("vllm", "sglang"):
        argv = get_engine(engine).argv({}, launch(engine, tmp_path))
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
    # the sim server started the way a trial starts it: listening on 127.0.0.1 only
    engine = get_engine("sim")
    spec = launch("sim", tmp_path)
    spec.port, spec.port_socket = reserve_port()
    with engine.server({}, spec) as srv:
        assert _listening(srv.port) == {"0100007F"}, _listening(srv.port)  # 127.0.0.1, not 0.0.0.0 / ::
    # and the sim server run by hand, with no --host at all
    import sys

    port, sock = reserve_port()
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "tuner.sim.server", "--model", "Qwen/Qwen3-0.6B",
                             "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        import time

        deadline = time.monotonic() + 60
        while not _listening(port) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert _listening(port) == {"0100007F"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ---- secrets -----------------------------------------------------------------------------------
HF = "hf_SeCrEtTokEn0123456789"
PW = "pw-Sup3rSecret"
KEY = "sk-live-0123456789abcdef"


def test_redaction_masks_tokens_keys_and_uri_credentials() -> None:
    masked = redact({
        "engines": {"vllm": {"env": {"HF_TOKEN": HF, "HUGGING_FACE_HUB_TOKEN": HF, "CUDA_VISIBLE_DEVICES": "0"}}},
        "tracking": {"mlflow_uri": f"https://alice:{PW}@mlflow.example.com"},
        "argv": ["vllm", "--api-key", KEY, "--max-num-seqs", "64"],
        "note": f"downloaded with token {HF}",
    })
    text = repr(masked)
    for secret in (HF, PW, KEY):
        assert secret not in text
    assert masked["engines"]["vllm"]["env"]["CUDA_VISIBLE_DEVICES"] == "0"  # nothing else is touched
    assert masked["tracking"]["mlflow_uri"] == "https://alice:***@mlflow.example.com"
    assert masked["argv"][-2:] == ["--max-num-seqs", "64"]
    assert redact_text(f"postgresql://bob:{PW}@db:5432/mlflow") == "postgresql://bob:***@db:5432/mlflow"


def test_the_working_directory_is_not_a_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PWD ends in a secret word ("pwd") but holds a path: output paths must print as they are."""
    monkeypatch.setenv("PWD", str(tmp_path))
    monkeypatch.setenv("DB_PASSWORD", "hunter2-secret")
    uri = f"sqlite:///{tmp_path}/mlflow.db password=hunter2-secret"
    assert redact_text(uri) == f"sqlite:///{tmp_path}/mlflow.db password=***"

/// Whether this test may make a network namespace of its own (`unshare -n`, as root or with
/// user namespaces); when not, the caller prints why and skips.
fn can_unshare_network() -> Result<(), String> {
    match Command::new("unshare").args(["-n", "true"]).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        Err(e) => Err(format!("unshare cannot run: {e}")),
    }
}

#[test]
fn without_any_network_list_and_run_work_and_a_pull_fails_plainly() {
    if let Err(reason) = can_unshare_network() {
        eprintln!("skipped: no network namespace can be made here ({reason})");
        return;
    }
    let home = Home::new();
    let offline = |args: &[&str]| {
        let d = home.path();
        Command::new("unshare")
            .arg("-n")
            .arg(env!("CARGO_BIN_EXE_hearth"))
            .args(args)
            .env("HOME", d)
            .env("XDG_DATA_HOME", d.join("data"))
            .env("XDG_CONFIG_HOME", d.join("config"))
            .env("HEARTH_DEMO_MODEL", repo("models/demo"))
            .env("HF_ENDPOINT", "https://huggingface.co")
            .env_remove("HEARTH_OFFLINE")
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("HEARTH_LOG")
            .output()
            .expect("hearth runs")
    };
    let list = offline(&["list"]);
    assert!(list.status.success(), "list: {}", stderr(&list));
    assert!(String::from_utf8_lossy(&list.stdout).contains("demo"));

    let run = offline(&[
        "run",
        "--model",
        "demo",
        "--backend",
        "cpu",
        "--max-tokens",
        "4",
        "-q",
        "Hello",
    ]);
    assert!(run.status.success(), "run: {}", stderr(&run));

    let pull = offline(&["pull", "someone/some-model"]);
    let err = stderr(&pull);
    assert_eq!(pull.status.code(), Some(2), "{err}");
    assert!(
        err.contains("could not reach") && err.contains("network") && !err.contains("panicked"),
        "the pull says the network is unreachable: {err}"
    );
    assert!(
        !home
            .path()
            .join("data/hearth/downloads/some-model")
            .exists(),
        "a failed pull leaves no trace"
    );
}

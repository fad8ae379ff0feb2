//! `hearth doctor`: can the NPU run models here, and if not, what exactly to do.
//!
//! Exit code 0 when the NPU path is ready, 1 when something blocks it (Hearth then runs on the
//! CPU), 2 on an error of the command itself. With `--report FILE`, it also writes what a tester
//! sends back ([`crate::report`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use hearth_npu::{DeviceContexts, Diagnosis, Metric, PowerSample, Status};

/// Check the NPU setup and explain each problem with its fix.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
    /// Read the system under this directory instead of / (for fixture trees and tests).
    #[arg(long, default_value = "/")]
    root: PathBuf,
    /// Write a report for Hearth's developers to FILE (JSON, also printed): the findings,
    /// FastFlowLM's own check, and with --model a short NPU-versus-CPU run. It holds no text of
    /// yours, and Hearth never sends it.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// With --report: the installed model to run on the NPU and the CPU (e.g. qwen3:1.7b); by
    /// default the first installed model the NPU can run here.
    #[arg(long, value_name = "NAME", requires = "report")]
    model: Option<String>,
    /// The Python environment holding FastFlowLM (`<DIR>/bin/flm`, the FastFlow SDK's), instead
    /// of the one chosen in the desktop's Settings › NPU.
    #[arg(long, value_name = "DIR")]
    flm_env: Option<PathBuf>,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.root.is_dir(),
        "--root {} is not a directory",
        args.root.display()
    );
    // FastFlowLM is looked for first where Settings › NPU (or --flm-env) says.
    // (A fixture tree given with --root is not this machine: its settings are not read.)
    let live = args.root == Path::new("/");
    let chosen = match crate::model_args::home() {
        Ok(home) if live => hearth_app::speech::use_desktop_flm_env(&home, args.flm_env.clone()),
        _ => args.flm_env.clone(),
    };
    let (flm_path, flm_place) = hearth_app::speech::npu::flm_found(chosen.as_deref());
    let mut sources = hearth_npu::PowerSources::discover(&args.root);
    // The NPU's own checks, then FastFlowLM's `validate --json` folded in, each with its fix.
    let diagnosis = hearth_app::npu::status(&args.root);
    // A short wait so CPU use is measured over an interval rather than unknown.
    std::thread::sleep(Duration::from_millis(250));
    let power = sources.sample(0.0);
    if let Some(file) = &args.report {
        write_report(&args.root, file, args.model.as_deref(), &diagnosis, &power)?;
    } else if args.json {
        let mut findings = crate::report::findings(&diagnosis, &power);
        if let Some(object) = findings.as_object_mut() {
            object.insert(
                "fastflowlm_found".into(),
                serde_json::json!({
                    "path": flm_path,
                    "place": flm_place,
                    "python_env_chosen": chosen,
                }),
            );
        }
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        print!("{}", crate::terminal::safe(&render(&diagnosis, &power)));
        let found = match &flm_path {
            Some(path) => format!("FastFlowLM: {} (found in {flm_place})\n", path.display()),
            None => format!("FastFlowLM: not found ({flm_place})\n"),
        };
        print!("{}", crate::terminal::safe(&found));
    }
    Ok(if diagnosis.ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Gathers the tester's report, prints it and writes it to `file`.
fn write_report(
    root: &Path,
    file: &Path,
    model: Option<&str>,
    diagnosis: &Diagnosis,
    power: &PowerSample,
) -> anyhow::Result<()> {
    let live = root == Path::new("/");
    let not_live = || serde_json::json!({ "not_run": "the report reads a directory given with --root, not this machine" });
    let fastflowlm = if live {
        crate::report::fastflowlm()
    } else {
        not_live()
    };
    // Without --model, the first installed model the NPU can run here.
    let picked = match (live, model) {
        (true, None) => crate::report::pick_npu_model(),
        _ => None,
    };
    let model = model.or(picked.as_deref());
    let runs = match (live, model) {
        (true, Some(model)) => {
            eprintln!("hearth: running {model} on the NPU and on the CPU for the report...");
            crate::report::runs(model)
        }
        (true, None) => serde_json::json!({
            "not_run": "no installed model can run on the NPU here (the doctor's findings say why): add --model NAME to run one anyway"
        }),
        (false, _) => not_live(),
    };
    let cpu_families = if live {
        crate::report::cpu_families(model)
    } else {
        not_live()
    };
    let report = crate::report::build(root, diagnosis, power, fastflowlm, runs, cpu_families);
    let text = serde_json::to_string_pretty(&report)? + "\n";
    std::fs::write(file, &text)
        .with_context(|| format!("could not write the report to {}", file.display()))?;
    print!("{}", crate::terminal::safe(&text));
    eprintln!(
        "hearth: the report above is in {}. Hearth has not sent it anywhere: read it, then attach \
         it where you report (it holds no prompt of yours; home folders, user names and other \
         programs' command lines are replaced).",
        file.display()
    );
    Ok(())
}

/// The hardware contexts, one line each, with the slots and the NPU's last error (nothing when
/// they could not be read: the Contexts check says why).
fn render_contexts(contexts: &Metric<DeviceContexts>) -> String {
    let view = match contexts {
        Metric::Available { value, .. } => value,
        // The Contexts check already says why.
        Metric::Unavailable { .. } => return String::new(),
    };
    let mut out = format!(
        "\nNPU hardware contexts ({} of {} slots in use; {}):\n",
        view.slots.used, view.slots.total, view.slots.source
    );
    if view.contexts.is_empty() {
        out.push_str("  none visible to you\n");
    }
    for c in &view.contexts {
        out.push_str(&format!("  {}\n", c.describe()));
    }
    match (&view.last_async_error, &view.async_error_unavailable) {
        (Some(e), _) => out.push_str(&format!(
            "  last NPU error since the driver loaded: {}\n",
            e.describe()
        )),
        (None, Some(why)) => out.push_str(&format!("  last NPU error: unavailable: {why}\n")),
        (None, None) => out.push_str("  no NPU error since the driver loaded\n"),
    }
    out
}

/// The plain-text report.
fn render(d: &Diagnosis, power: &PowerSample) -> String {
    let mut out = format!("{}\n\n", d.summary);
    for c in &d.checks {
        let tag = match c.status {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warning => "warning",
            Status::Problem => "PROBLEM",
        };
        out.push_str(&format!("  {tag:<8} {}\n", c.summary));
        if let Some(fix) = &c.fix {
            let mut lines = fix.lines();
            if let Some(first) = lines.next() {
                out.push_str(&format!("           fix: {first}\n"));
            }
            for l in lines {
                out.push_str(&format!("                {l}\n"));
            }
        }
    }
    out.push_str(&render_contexts(&d.contexts));
    out.push_str("\nPower now (idle reading; the NPU is not woken):\n");
    let row = |name: &str, m: &Metric<f64>, unit: &str, decimals: usize| {
        format!("  {name:<14} {}\n", m.describe(unit, decimals))
    };
    out.push_str(&row("NPU power", &power.npu_watts, "W", 2));
    out.push_str(&row("NPU busy", &power.npu_percent, "%", 0));
    out.push_str(&row("Package power", &power.package_watts, "W", 1));
    out.push_str(&row("Battery draw", &power.battery_watts, "W", 1));
    out.push_str(&row("CPU busy", &power.cpu_percent, "%", 0));
    out.push_str(&row("iGPU busy", &power.igpu_percent, "%", 0));
    if d.ready {
        out.push_str("\nThe NPU path is ready.\n");
    } else {
        out.push_str("\nUntil the problems above are fixed, Hearth runs models on the CPU.\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/npu")
            .join(name)
    }

    #[test]
    fn ready_fixture_renders_and_exits_zero() {
        let root = fixture("strix-ready");
        let d = hearth_npu::diagnose(&root);
        let p = hearth_npu::PowerSources::discover(&root).sample(0.0);
        let text = render(&d, &p);
        assert!(
            text.starts_with("NPU ready: NPU Strix (XDNA 2)\n"),
            "{text}"
        );
        assert!(text.contains("  ok       NPU firmware 1.1.2.64"), "{text}");
        assert!(
            text.contains("NPU power      1.63 W (amdgpu gpu_metrics (card1) average_ipu_power)")
        );
        let code = run(Args {
            json: false,
            root,
            report: None,
            model: None,
            flm_env: None,
        })
        .unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
    }

    #[test]
    fn problems_render_with_fixes_and_exit_one() {
        let root = fixture("strix-needs-fixes");
        let d = hearth_npu::diagnose(&root);
        let p = hearth_npu::PowerSources::discover(&root).sample(0.0);
        let text = render(&d, &p);
        assert!(
            text.contains("  PROBLEM  Locked-memory limit is 8 MiB"),
            "{text}"
        );
        assert!(
            text.contains("                sudo tee") || text.contains("| sudo tee"),
            "{text}"
        );
        assert!(text.contains("Hearth runs models on the CPU"));
        let code = run(Args {
            json: true,
            root,
            report: None,
            model: None,
            flm_env: None,
        })
        .unwrap();
        assert_eq!(code, ExitCode::from(1));
    }

    #[test]
    fn json_has_diagnosis_and_power() {
        let root = fixture("strix-ready");
        let d = hearth_npu::diagnose(&root);
        let p = hearth_npu::PowerSources::discover(&root).sample(0.0);
        let v = crate::report::findings(&d, &p);
        assert_eq!(v["ready"], true);
        assert_eq!(v["power"]["package_watts"]["value"], 14.8);
        assert!(v["power"]["cpu_percent"]["unavailable"].is_string());
    }

    #[test]
    fn contexts_render_one_line_each_with_slots() {
        use hearth_npu::contexts::{AsyncError, ResourceInfo};
        let blob = |n: &str| std::fs::read(fixture("blobs").join(n)).unwrap();
        let reply = hearth_npu::ioctl::ArrayReply {
            element_size: 160,
            count: 2,
            bytes: blob("hwctx_named.bin"),
        };
        let view = DeviceContexts::from_replies(
            &reply,
            ResourceInfo::decode(&blob("resource_info_full.bin")),
            AsyncError::decode(&blob("async_error.bin")),
        )
        .unwrap();
        let root = fixture("strix-busy");
        let mut d = hearth_npu::diagnose(&root);
        d.set_contexts(Metric::available(view, "fixture"));
        let p = hearth_npu::PowerSources::discover(&root).sample(0.0);
        let text = render(&d, &p);
        assert!(
            text.contains("  warning  The NPU reports a fault in context 2 of flm (process 4242)"),
            "{text}"
        );
        assert!(
            text.contains("NPU hardware contexts (16 of 16 slots in use; amdxdna resource info (every process)):\n  context 1 of flm (process 4242): idle, 5120 of 5120 commands done, columns 0-3, healthy\n  context 2 of flm (process 4242): active, 3300 of 3301 commands done, columns 4-7, at op 17 PC 0x00001c3c, FAULT: fatal error type 0x2"),
            "{text}"
        );
        assert!(text.contains("last NPU error since the driver loaded: error 0x400010203"));
    }

    #[test]
    fn report_is_written_and_says_what_was_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.json");
        let code = run(Args {
            json: false,
            root: fixture("strix-busy"),
            report: Some(file.clone()),
            model: None,
            flm_env: None,
        })
        .unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(v["report_format"], 1);
        assert_eq!(v["doctor"]["ready"], true);
        assert_eq!(
            v["doctor"]["holders"][0]["command"],
            serde_json::Value::Null
        );
        assert!(v["runs"]["not_run"].as_str().unwrap().contains("--root"));
        assert!(v["fastflowlm"]["not_run"].is_string());
        assert!(v["cpu_families"]["not_run"].is_string());
        assert_eq!(v["npu_holder"], "flm (process 4242)");
        assert!(v["doctor"]["contexts"]["unavailable"]
            .as_str()
            .unwrap()
            .contains("not a character device"));
    }

    #[test]
    fn missing_root_is_an_error() {
        let err = run(Args {
            json: false,
            root: PathBuf::from("/nonexistent-hearth-root"),
            report: None,
            model: None,
            flm_env: None,
        })
        .unwrap_err();
        assert!(err.to_string().contains("is not a directory"));
    }
}

//! `hearth doctor`: can the NPU run models here, and if not, what exactly to do.
//!
//! Exit code 0 when the NPU path is ready, 1 when something blocks it (Hearth then runs on the
//! CPU), 2 on an error of the command itself.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use hearth_npu::{Diagnosis, Metric, PowerSample, Status};

/// Check the NPU setup and explain each problem with its fix.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
    /// Read the system under this directory instead of / (for fixture trees and tests).
    #[arg(long, default_value = "/")]
    root: PathBuf,
}

/// The JSON document: the diagnosis plus one idle power reading.
#[derive(serde::Serialize)]
struct Report<'a> {
    #[serde(flatten)]
    diagnosis: &'a Diagnosis,
    power: &'a PowerSample,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.root.is_dir(),
        "--root {} is not a directory",
        args.root.display()
    );
    let mut sources = hearth_npu::PowerSources::discover(&args.root);
    // The NPU's own checks, then FastFlowLM's `validate --json` folded in, each with its fix.
    let diagnosis = hearth_chat::npu::npu_status(&args.root);
    // A short wait so CPU use is measured over an interval rather than unknown.
    std::thread::sleep(Duration::from_millis(250));
    let power = sources.sample(0.0);
    if args.json {
        let report = Report {
            diagnosis: &diagnosis,
            power: &power,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::terminal::safe(&render(&diagnosis, &power)));
    }
    Ok(if diagnosis.ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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
        let code = run(Args { json: false, root }).unwrap();
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
        let code = run(Args { json: true, root }).unwrap();
        assert_eq!(code, ExitCode::from(1));
    }

    #[test]
    fn json_has_diagnosis_and_power() {
        let root = fixture("strix-ready");
        let d = hearth_npu::diagnose(&root);
        let p = hearth_npu::PowerSources::discover(&root).sample(0.0);
        let v = serde_json::to_value(Report {
            diagnosis: &d,
            power: &p,
        })
        .unwrap();
        assert_eq!(v["ready"], true);
        assert_eq!(v["power"]["package_watts"]["value"], 14.8);
        assert!(v["power"]["cpu_percent"]["unavailable"].is_string());
    }

    #[test]
    fn missing_root_is_an_error() {
        let err = run(Args {
            json: false,
            root: PathBuf::from("/nonexistent-hearth-root"),
        })
        .unwrap_err();
        assert!(err.to_string().contains("is not a directory"));
    }
}

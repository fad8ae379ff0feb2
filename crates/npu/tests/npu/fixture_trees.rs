//! The doctor, power sources and telemetry on fixture trees with real sysfs/procfs layouts
//! (`tests/fixtures/npu/`, written by `make_fixtures.py` there).

use hearth_npu::contexts::{AsyncError, ContextState, DeviceContexts, ResourceInfo};
use hearth_npu::gpu_metrics::GpuMetrics;
use hearth_npu::ioctl::ArrayReply;
use hearth_npu::ioctl::{decode_sensors, FirmwareVersion, SensorKind};
use hearth_npu::{diagnose, diagnose_with, CheckId, Detection, Metric, PowerSources, Status};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

fn tree(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/npu")
        .join(name)
}

fn check(d: &hearth_npu::Diagnosis, id: CheckId) -> &hearth_npu::Check {
    d.checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no {id:?} check in {:#?}", d.checks))
}

fn refuse(errno: i32) -> impl FnOnce(&Path) -> io::Result<fs::File> {
    move |_| Err(io::Error::from_raw_os_error(errno))
}

/// Copies a fixture tree (keeping symlinks) so a test can change it.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type().unwrap();
        if ty.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if ty.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap();
        }
    }
}

#[test]
fn strix_ready_is_ready() {
    let d = diagnose(&tree("strix-ready"));
    assert!(d.ready, "every check should pass: {:#?}", d.checks);
    assert_eq!(d.summary, "NPU ready: NPU Strix (XDNA 2)");
    let Detection::Found(dev) = &d.detection else {
        panic!("device not found")
    };
    assert_eq!(dev.firmware, Some(FirmwareVersion([1, 1, 2, 64])));
    assert_eq!(dev.driver.as_deref(), Some("amdxdna"));
    assert_eq!(d.xrt.version.as_deref(), Some("2.20.0"));
    assert_eq!(d.fastflowlm.version.as_deref(), Some("1.0.6"));
    assert_eq!(check(&d, CheckId::Kernel).status, Status::Ok);
    assert!(
        check(&d, CheckId::Sensors)
            .summary
            .contains("not a character device"),
        "the fixture node is a plain file, so the ioctl must not run"
    );
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["ready"], true);
    assert_eq!(json["detection"]["state"], "found");
    assert_eq!(json["checks"][0]["id"], "device");
    assert_eq!(json["checks"][0]["status"], "ok");
}

#[test]
fn strix_ready_power_sources() {
    let mut s = PowerSources::discover(&tree("strix-ready"));
    let p = s.sample(0.0);
    assert_eq!(p.npu_watts.value(), Some(&1.63));
    assert_eq!(
        p.npu_watts.source(),
        Some("amdgpu gpu_metrics (card1) average_ipu_power")
    );
    assert_eq!(
        p.npu_percent.value(),
        Some(&((92.0 + 90.0 + 88.0 + 91.0) / 8.0))
    );
    assert_eq!(p.package_watts.value(), Some(&14.8));
    assert_eq!(
        p.package_watts.source(),
        Some("amdgpu hwmon4 power1_input (PPT)")
    );
    assert_eq!(p.battery_watts.value(), Some(&18.4));
    assert_eq!(p.igpu_percent.value(), Some(&3.0));
    assert_eq!(
        p.cpu_percent,
        Metric::unavailable("no CPU time has passed since the previous reading"),
        "a fixed /proc/stat gives no CPU figure, and says so"
    );
    assert_eq!(s.battery_capacity_wh(), Some(73.0));
}

#[test]
fn strix_needs_fixes_reports_each_problem_with_its_fix() {
    let d = diagnose(&tree("strix-needs-fixes"));
    assert!(!d.ready);
    assert_eq!(check(&d, CheckId::Device).status, Status::Ok);
    assert!(check(&d, CheckId::Device)
        .summary
        .contains("NPU Strix Halo (XDNA 2)"));
    let fw = check(&d, CheckId::Firmware);
    assert_eq!(fw.status, Status::Problem);
    assert!(fw.summary.contains("1.0.0.166 is older than 1.1.0.0"));
    let mem = check(&d, CheckId::Memlock);
    assert_eq!(mem.status, Status::Problem);
    assert!(mem.summary.contains("8 MiB"), "{}", mem.summary);
    let fix = mem.fix.as_deref().unwrap();
    assert!(fix.contains("/etc/security/limits.d/99-hearth-memlock.conf"));
    assert!(fix.contains("log out"));
    let xrt = check(&d, CheckId::Xrt);
    assert_eq!(xrt.status, Status::Problem);
    assert!(xrt.summary.contains("XRT 2.13.0 is too old"));
    assert_eq!(check(&d, CheckId::Fastflowlm).status, Status::Problem);
    assert!(
        d.summary.starts_with("NPU not ready (4 problems)"),
        "{}",
        d.summary
    );
}

#[test]
fn strix_needs_fixes_power_says_what_is_missing() {
    let p = PowerSources::discover(&tree("strix-needs-fixes")).sample(0.0);
    let npu = p.npu_watts.describe("W", 2);
    assert!(
        npu.contains("average_ipu_power is not filled in (0xFFFF)"),
        "{npu}"
    );
    assert!(npu.contains("no amdxdna hwmon"), "{npu}");
    assert_eq!(p.package_watts.value(), Some(&22.1));
    assert_eq!(
        p.package_watts.source(),
        Some("amdgpu gpu_metrics (card0) average_socket_power")
    );
    assert_eq!(
        p.battery_watts,
        Metric::unavailable("on mains power (BAT1 is charging)")
    );
}

#[test]
fn busy_device_names_the_holder() {
    let d = diagnose_with(&tree("strix-busy"), refuse(libc::EBUSY));
    assert!(!d.ready);
    let a = check(&d, CheckId::Access);
    assert_eq!(a.status, Status::Problem);
    assert_eq!(
        a.summary,
        "/dev/accel/accel0 is busy: flm (process 4242) has it open"
    );
    assert!(a.fix.as_deref().unwrap().contains("kill 4242"));
    assert_eq!(
        d.holders[0].command.as_deref(),
        Some("flm serve qwen3:1.7b --port 52625")
    );
}

#[test]
fn busy_device_with_no_visible_holder_is_another_users_program() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&tree("strix-busy"), dir.path());
    fs::remove_dir_all(dir.path().join("proc/4242")).unwrap();
    let d = diagnose_with(dir.path(), refuse(libc::EBUSY));
    let a = check(&d, CheckId::Access);
    assert_eq!(a.status, Status::Problem);
    assert_eq!(
        a.summary,
        "/dev/accel/accel0 is busy: another user's program has it open"
    );
    assert!(d.holders.is_empty());
}

#[test]
fn an_hrx_fastflowlm_needs_no_xrt() {
    // FastFlowLM's HRX build (1.0.11+, and the FastFlow SDK's) links libhrx, not XRT: the
    // doctor checks the driver, firmware and device, and does not ask for XRT.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&tree("strix-ready"), dir.path());
    fs::remove_dir_all(dir.path().join("opt/xilinx")).unwrap();
    let d = diagnose(dir.path());
    assert_eq!(
        check(&d, CheckId::Xrt).code,
        "xrt_missing",
        "an XRT build needs XRT"
    );
    assert!(!d.ready);
    // The `flm` script stands in for the portable wrapper; the binary beside it is HRX's.
    fs::write(
        dir.path().join("usr/bin/flm-real"),
        hearth_npu::elf::minimal_elf(&["libhrx.so.0", "libstdc++.so.6", "libc.so.6"]),
    )
    .unwrap();
    let d = diagnose(dir.path());
    assert_eq!(d.fastflowlm.runtime, Some(hearth_npu::elf::Runtime::Hrx));
    let xrt = check(&d, CheckId::Xrt);
    assert_eq!(
        (xrt.status, xrt.code.as_str()),
        (Status::Ok, "xrt_not_needed")
    );
    assert!(d.ready, "{:#?}", d.checks);
}

#[test]
fn open_device_that_others_use_is_info_not_a_problem() {
    let d = diagnose(&tree("strix-busy"));
    assert!(d.ready);
    let a = check(&d, CheckId::Access);
    assert_eq!(a.status, Status::Info);
    assert!(a.summary.contains("also in use by flm (process 4242)"));
}

#[test]
fn no_permission_tells_how_to_join_the_group() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&tree("strix-ready"), dir.path());
    let gid = fs::metadata(dir.path().join("dev/accel/accel0"))
        .unwrap()
        .gid();
    // The node's group is `render`, and ana is not in it.
    fs::write(
        dir.path().join("etc/group"),
        format!("adm:x:4:ana\nrender:x:{gid}:\nana:x:1000:\n"),
    )
    .unwrap();
    fs::write(
        dir.path().join("proc/self/status"),
        "Uid:\t1000\t1000\t1000\t1000\nGroups:\t4 1000\n",
    )
    .unwrap();
    let d = diagnose_with(dir.path(), refuse(libc::EACCES));
    let a = check(&d, CheckId::Access);
    assert_eq!(a.status, Status::Problem);
    assert_eq!(
        a.summary,
        "No permission to open /dev/accel/accel0: it belongs to the render group"
    );
    let fix = a.fix.as_deref().unwrap();
    assert!(fix.contains("`sudo usermod -aG render ana`"), "{fix}");
    assert!(fix.contains("log out and log back in"), "{fix}");

    // Added to the group since this login began: only a new login is needed.
    fs::write(
        dir.path().join("etc/group"),
        format!("render:x:{gid}:ana\n"),
    )
    .unwrap();
    let d = diagnose_with(dir.path(), refuse(libc::EACCES));
    let a = check(&d, CheckId::Access);
    assert!(a.summary.contains("You were added to the render group"));
    assert!(!a.fix.as_deref().unwrap().contains("usermod"));
}

#[test]
fn pci_npu_without_driver_on_old_kernel() {
    let d = diagnose(&tree("no-driver-old-kernel"));
    let dev = check(&d, CheckId::Device);
    assert_eq!(dev.status, Status::Problem);
    assert_eq!(
        dev.summary,
        "An XDNA 2 NPU is in this computer (PCI 0000:c5:00.1), but no driver has taken it"
    );
    assert!(dev.fix.as_deref().unwrap().contains("amdxdna-dkms"));
    let k = check(&d, CheckId::Kernel);
    assert_eq!(k.status, Status::Problem);
    assert!(k.summary.contains("6.8.0-51-generic is older than 6.14"));
    assert!(
        !d.checks.iter().any(|c| c.id == CheckId::Access),
        "no device node to open"
    );
}

#[test]
fn phoenix_is_unsupported() {
    let d = diagnose(&tree("phoenix"));
    assert!(!d.ready);
    let dev = check(&d, CheckId::Device);
    assert_eq!(dev.status, Status::Problem);
    assert!(dev.summary.contains("AMD XDNA 1 NPU"));
    assert!(dev.summary.contains("first generation"));
}

#[test]
fn garbage_everywhere_gives_reasons_not_values() {
    let root = tree("garbage");
    let d = diagnose(&root);
    assert!(!d.ready);
    assert_eq!(d.detection, Detection::NotFound);
    assert_eq!(check(&d, CheckId::Kernel).status, Status::Warning);
    assert_eq!(check(&d, CheckId::Memlock).status, Status::Warning);
    let mut s = PowerSources::discover(&root);
    let p = s.sample(1.0);
    for (name, m) in [
        ("npu", &p.npu_watts),
        ("npu%", &p.npu_percent),
        ("package", &p.package_watts),
        ("battery", &p.battery_watts),
        ("cpu", &p.cpu_percent),
        ("igpu", &p.igpu_percent),
    ] {
        assert!(m.value().is_none(), "{name} must not have a value: {m:?}");
    }
    let why = p.igpu_percent.describe("%", 0);
    assert!(why.contains("card0: gpu_metrics format"), "{why}");
    assert!(
        why.contains("/sys/class/drm/card1/device/gpu_metrics could not be read"),
        "{why}"
    );
    assert!(
        why.contains("card2: gpu_metrics says 264 bytes but the file has 100"),
        "{why}"
    );
    let pkg = p.package_watts.describe("W", 1);
    assert!(
        pkg.contains("power1_average has unexpected content"),
        "{pkg}"
    );
    assert!(p
        .battery_watts
        .describe("W", 1)
        .contains("BAT0 reports no power"));
}

#[test]
fn unreadable_file_is_reported_as_needing_permission() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&tree("strix-ready"), dir.path());
    let hw = dir.path().join("sys/class/hwmon/hwmon4/power1_input");
    fs::set_permissions(&hw, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let p = PowerSources::discover(dir.path()).sample(0.0);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // root reads anything: the value comes through
        assert_eq!(p.package_watts.value(), Some(&14.8));
    } else {
        assert_eq!(
            p.package_watts.describe("W", 1),
            "unavailable: /sys/class/hwmon/hwmon4/power1_input needs permission to read; \
             no amdgpu gpu_metrics file"
        );
    }
}

#[test]
fn blobs_decode() {
    let blob = |n: &str| fs::read(tree("blobs").join(n)).unwrap();
    let m = GpuMetrics::parse(&blob("gpu_metrics_v3_264.bin")).unwrap();
    assert_eq!(
        (m.socket_power_mw, m.ipu_power_mw, m.ipuclk_mhz),
        (Some(9000), Some(250), Some(400))
    );
    let e = GpuMetrics::parse(&blob("gpu_metrics_v3_256.bin")).unwrap();
    assert_eq!(
        (e.structure_size, e.ipuclk_mhz, e.ipu_reads_mb_s),
        (256, Some(400), None)
    );
    let u = GpuMetrics::parse(&blob("gpu_metrics_v3_264_unfilled.bin")).unwrap();
    assert_eq!((u.socket_power_mw, u.ipu_power_mw), (None, None));

    let s = decode_sensors(&blob("sensors_strix.bin"));
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].kind, SensorKind::Power);
    assert!((s[0].value - 1.63).abs() < 1e-9);
    assert_eq!(s[2].label, "Column 1 Utilization");
    let w = decode_sensors(&blob("sensors_2026_units_w.bin"));
    assert!(
        (w[0].value - 2.48).abs() < 1e-9,
        "unitm, not the units string, scales"
    );
    assert_eq!(
        FirmwareVersion::decode(&blob("firmware_version.bin")),
        Some(FirmwareVersion([1, 1, 2, 64]))
    );
}

#[test]
fn telemetry_on_a_fixture_laptop() {
    let t = hearth_npu::Telemetry::start_with(
        &tree("strix-ready"),
        hearth_npu::TelemetryOptions {
            interval: std::time::Duration::from_secs(3600),
            ..Default::default()
        },
    );
    t.sample_now();
    let r = t.finish();
    assert_eq!(r.samples.len(), 3, "start, the mark, finish");
    assert_eq!(
        r.battery_capacity_wh,
        Some(73.0),
        "on battery with energy_full"
    );
    let s = &r.samples[2];
    assert_eq!(
        s.package_watts.source(),
        Some("amdgpu hwmon4 power1_input (PPT)")
    );
    assert_eq!(s.battery_watts.value(), Some(&18.4));
    assert_eq!(
        s.npu_watts.source(),
        Some("amdgpu gpu_metrics (card1) average_ipu_power")
    );
}

/// The replies of a machine where FastFlowLM's decode context crashed and every slot is taken,
/// as the driver writes them (`blobs/`, built from the uapi header by make_fixtures.py).
fn crashed_contexts(records: &str, element_size: u32) -> DeviceContexts {
    let blob = |n: &str| fs::read(tree("blobs").join(n)).unwrap();
    let reply = ArrayReply {
        element_size,
        count: 2,
        bytes: blob(records),
    };
    DeviceContexts::from_replies(
        &reply,
        ResourceInfo::decode(&blob("resource_info_full.bin")),
        AsyncError::decode(&blob("async_error.bin")),
    )
    .unwrap()
}

#[test]
fn context_blobs_decode_at_either_element_size() {
    let named = crashed_contexts("hwctx_named.bin", 160);
    let old = crashed_contexts("hwctx_linux_7_1.bin", 144);
    for d in [&named, &old] {
        assert_eq!(d.contexts.len(), 2);
        let c = &d.contexts[1];
        assert_eq!(
            (c.context_id, c.pid, c.start_col, c.num_col),
            (2, 4242, 4, 4)
        );
        assert_eq!((c.submitted, c.completed, c.pending()), (3301, 3300, 1));
        assert_eq!(c.state, ContextState::Active);
        assert_eq!((c.txn_op_idx, c.ctx_pc), (17, 0x1C3C));
        assert_eq!((c.fatal_error_type, c.fatal_error_exception_type), (2, 5));
        assert_eq!(c.fatal_error_exception_pc, 0x1C40);
        assert_eq!(d.contexts[0].fault(), None);
        assert_eq!(d.contexts[0].heap_bytes, 64 << 20);
        assert_eq!((d.slots.used, d.slots.total), (16, 16));
        let e = d.last_async_error.unwrap();
        assert_eq!((e.code, e.extra), (0x0000_0004_0001_0203, 0x0302));
    }
    assert_eq!(named.contexts[1].process.as_deref(), Some("flm"));
    assert_eq!(
        old.contexts[1].process, None,
        "a 144-byte record has no name"
    );
    let raised = UNIX_EPOCH + Duration::from_secs(1_796_428_800);
    let faults = named.faults_since(raised - Duration::from_secs(30));
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults[0].starts_with("context 2 of flm (process 4242): fatal error type 0x2"));
    assert!(faults[1].starts_with("the NPU raised error 0x400010203"));
    assert_eq!(
        named.faults_since(raised + Duration::from_secs(30)).len(),
        1,
        "an error raised before the answer began is not its fault"
    );
}

#[test]
fn doctor_warns_of_the_crashed_context_and_the_full_slots() {
    let mut d = diagnose(&tree("strix-busy"));
    assert!(
        check(&d, CheckId::Contexts)
            .summary
            .contains("not a character device"),
        "the fixture node is a plain file, so the ioctl must not run"
    );
    d.set_contexts(Metric::available(
        crashed_contexts("hwctx_named.bin", 160),
        "fixture",
    ));
    let c = check(&d, CheckId::Contexts);
    assert_eq!(c.status, Status::Warning);
    assert!(
        c.summary
            .starts_with("The NPU reports a fault in context 2 of flm (process 4242)"),
        "{}",
        c.summary
    );
    assert!(
        c.summary
            .contains("All 16 NPU context slots are in use (flm (process 4242) x2)"),
        "{}",
        c.summary
    );
    assert!(d.ready, "a warning does not block the NPU path");
}

#[test]
fn every_finding_and_fix_has_a_code_and_names_its_values_as_parameters() {
    // The desktop shows findings in the user's language from its catalog (npu.<code>, filled
    // with params): each must carry a code, and each fix a fix code.
    for name in [
        "strix-ready",
        "strix-needs-fixes",
        "strix-busy",
        "no-driver-old-kernel",
        "phoenix",
        "garbage",
    ] {
        let d = diagnose(&tree(name));
        for c in &d.checks {
            assert!(!c.code.is_empty(), "{name}: {c:?}");
            assert_eq!(c.fix.is_some(), c.fix_code.is_some(), "{name}: {c:?}");
        }
    }
    let d = diagnose(&tree("strix-needs-fixes"));
    let fw = check(&d, CheckId::Firmware);
    assert_eq!(fw.code, "firmware_old");
    assert_eq!(fw.params["version"], "1.0.0.166");
    assert_eq!(fw.params["min"], "1.1.0.0");
    assert_eq!(fw.fix_code.as_deref(), Some("firmware"));
    let mem = check(&d, CheckId::Memlock);
    assert_eq!(mem.code, "memlock_low");
    assert_eq!(
        mem.params["path"],
        "/etc/security/limits.d/99-hearth-memlock.conf"
    );
}

//! Busy-looping child processes for `hearth bench --busy N`: another program keeping cores busy,
//! as on a laptop that compiles or plays a video while Hearth answers.
//!
//! Each child is this executable run as `hearth bench --busy-loop`; it spins until it is
//! killed or its parent exits (it checks its parent id every few milliseconds, so not even a
//! killed bench leaves it behind). [`BusyLoops`] kills and reaps its children when dropped,
//! which also happens while a panic unwinds.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// The running children; dropping this stops them.
#[derive(Debug)]
pub struct BusyLoops {
    children: Vec<Child>,
}

impl BusyLoops {
    /// Starts `count` busy-looping children.
    pub fn start(count: usize) -> anyhow::Result<BusyLoops> {
        let exe = std::env::current_exe().context("cannot find this program to start --busy")?;
        let mut loops = BusyLoops {
            children: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let child = Command::new(&exe)
                .args(["bench", "--busy-loop"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| format!("cannot start a busy process ({})", exe.display()))?;
            loops.children.push(child); // pushed at once, so an error below still stops it
        }
        Ok(loops)
    }

    /// Process ids of the children.
    #[cfg(test)]
    fn ids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
        }
        for child in &mut self.children {
            let _ = child.wait();
        }
    }
}

/// The child's side: spins on one core until its parent goes away.
pub fn busy_loop() -> ! {
    let parent = std::os::unix::process::parent_id();
    let mut x = 1u64;
    loop {
        let until = Instant::now() + Duration::from_millis(5);
        while Instant::now() < until {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary stands in for `hearth`: its children exit at once on the unknown
    /// arguments, so this checks only that every started child is reaped on drop.
    #[test]
    fn dropping_the_loops_reaps_every_child() {
        let loops = BusyLoops::start(2).unwrap();
        let ids = loops.ids();
        assert_eq!(ids.len(), 2);
        drop(loops);
        for id in ids {
            let status = std::fs::read_to_string(format!("/proc/{id}/status"));
            // Reaped: gone, or (pid reused) some other process that is not our zombie child.
            if let Ok(status) = status {
                assert!(!status.contains("State:\tZ"), "child {id} left as a zombie");
            }
        }
    }
}

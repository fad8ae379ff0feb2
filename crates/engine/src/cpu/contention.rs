//! How many threads the pool can count on while other programs keep cores busy.
//!
//! A pool thread that shares its CPU with a busy program is descheduled for whole time slices,
//! and every job waits for the chunk it holds: on a 2-core machine with one busy program,
//! decoding with 2 threads was slower than with 1 (7.1 against 8.4 tok/s, `bench/README.md`).
//! So the caller of the pool's jobs looks, every few milliseconds, at how many threads the whole
//! machine keeps runnable (the kernel's count in `/proc/loadavg`), takes the pool's own away,
//! and lets as many pool threads take part as there are CPUs left (at least one, at most the
//! pool). A program counts as busy only when it was runnable at every look of the last
//! [`LOOKS`]: a short burst (a window repainting) changes nothing.

use std::time::{Duration, Instant};

/// How often the caller of a job looks at the machine's runnable threads.
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// Looks kept: a program must stay runnable for all of them (40 ms) to take a thread away.
pub(crate) const LOOKS: usize = 8;

/// Where the count of runnable threads comes from: the kernel, or a test's script.
pub(crate) type RunnableSource = Box<dyn FnMut() -> Option<usize> + Send>;

/// The pool's view of the other programs' load.
pub(crate) struct CpuShare {
    /// Logical CPUs the machine has online (the runnable count is machine-wide).
    online: usize,
    /// Time between looks ([`LOOK_EVERY`]).
    every: Duration,
    /// The pool's threads in all (the most that may take part).
    threads: usize,
    runnable: RunnableSource,
    /// Other programs' runnable threads at each of the last looks (`None` before the first).
    others: [Option<usize>; LOOKS],
    next: usize,
    last_look: Option<Instant>,
}

impl CpuShare {
    /// The view of a pool of `threads` threads on this machine, read from `/proc/loadavg`.
    pub(crate) fn of_this_machine(threads: usize) -> CpuShare {
        CpuShare::new(
            threads,
            online_cpus(),
            LOOK_EVERY,
            Box::new(runnable_threads),
        )
    }

    /// The view of a pool of `threads` on `online` CPUs, looking at `runnable` at most once
    /// per `every`.
    pub(crate) fn new(
        threads: usize,
        online: usize,
        every: Duration,
        runnable: RunnableSource,
    ) -> CpuShare {
        CpuShare {
            online: online.max(1),
            every,
            threads: threads.max(1),
            runnable,
            others: [None; LOOKS],
            next: 0,
            last_look: None,
        }
    }

    /// Looks again if `every` has passed since the last look, and returns how many
    /// threads should take part in jobs now; `None` when it did not look (or cannot: no
    /// `/proc`), so the count stays as it was. `ours` is the pool's threads that are runnable
    /// now (the caller and the workers not asleep).
    pub(crate) fn look(&mut self, now: Instant, ours: usize) -> Option<usize> {
        if self
            .last_look
            .is_some_and(|last| now.duration_since(last) < self.every)
        {
            return None;
        }
        self.last_look = Some(now);
        let runnable = (self.runnable)()?;
        self.others[self.next] = Some(runnable.saturating_sub(ours));
        self.next = (self.next + 1) % LOOKS;
        Some(threads_to_use(self.online, self.threads, &self.others))
    }
}

/// `online` CPUs less the other programs that were runnable at every look, kept within
/// `1..=threads`.
pub(crate) fn threads_to_use(online: usize, threads: usize, others: &[Option<usize>]) -> usize {
    let busy = others.iter().map(|o| o.unwrap_or(0)).min().unwrap_or(0);
    online.saturating_sub(busy).clamp(1, threads.max(1))
}

/// Threads runnable on the whole machine now (the fourth field of `/proc/loadavg`,
/// `running/total`).
fn runnable_threads() -> Option<usize> {
    parse_runnable(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The `running` of `/proc/loadavg`'s `running/total` field.
pub(crate) fn parse_runnable(loadavg: &str) -> Option<usize> {
    let field = loadavg.split_ascii_whitespace().nth(3)?;
    let (running, _total) = field.split_once('/')?;
    running.parse().ok()
}

/// Logical CPUs online on this machine (`/sys/devices/system/cpu/online`, a list such as
/// `0-3,6`), else the CPUs this process may use.
fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| parse_cpu_list(&list))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How many CPUs a kernel CPU list (`0-3,6`) names.
pub(crate) fn parse_cpu_list(list: &str) -> Option<usize> {
    let mut count = 0usize;
    for range in list.trim().split(',') {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
        count = count.checked_add(last.checked_sub(first)?.checked_add(1)?)?;
    }
    (count > 0).then_some(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn the_running_count_is_read_from_loadavg() {
        assert_eq!(parse_runnable("0.32 0.10 0.04 3/150 1234\n"), Some(3));
        for bad in [
            "",
            "0.32 0.10 0.04",
            "0.32 0.10 0.04 3 1234",
            "a b c x/150 1",
        ] {
            assert_eq!(parse_runnable(bad), None, "{bad:?}");
        }
        assert!(runnable_threads().is_none_or(|n| n >= 1), "this test runs");
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0-3,6,8-9"), Some(7));
        assert_eq!(parse_cpu_list("5"), Some(1));
        for bad in ["", "3-1", "a-b", "0-", "0-18446744073709551615,0-1"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
        }
        assert!(online_cpus() >= 1);
    }

    #[test]
    fn a_program_busy_at_every_look_takes_one_thread_away() {
        let looks =
            |others: &[usize]| -> Vec<Option<usize>> { others.iter().map(|&o| Some(o)).collect() };
        assert_eq!(threads_to_use(2, 2, &looks(&[0; LOOKS])), 2);
        assert_eq!(threads_to_use(2, 2, &looks(&[1; LOOKS])), 1);
        // Busy at all but one look: a burst, not a busy program.
        assert_eq!(threads_to_use(2, 2, &looks(&[1, 1, 1, 0, 1, 1, 1, 1])), 2);
        // Never below one thread, never above the pool.
        assert_eq!(threads_to_use(2, 2, &looks(&[5; LOOKS])), 1);
        assert_eq!(threads_to_use(16, 8, &looks(&[1; LOOKS])), 8);
        assert_eq!(threads_to_use(8, 8, &looks(&[3; LOOKS])), 5);
        assert_eq!(threads_to_use(2, 2, &[None; LOOKS]), 2);
    }

    #[test]
    fn looks_are_spaced_and_count_the_pools_own_threads_out() {
        let script = Arc::new(Mutex::new(vec![3usize; 2 * LOOKS]));
        let source = Arc::clone(&script);
        let pop = move || source.lock().unwrap().pop();
        let mut share = CpuShare::new(2, 2, LOOK_EVERY, Box::new(pop));
        let start = Instant::now();
        // 3 runnable with the pool's 2: one other program.
        for i in 0..LOOKS as u32 {
            let now = start + LOOK_EVERY * i;
            let expected = if i + 1 < LOOKS as u32 { 2 } else { 1 };
            assert_eq!(share.look(now, 2), Some(expected), "look {i}");
            assert_eq!(share.look(now + LOOK_EVERY / 2, 2), None, "too soon");
        }
        // The pool now runs one thread; the other program still runs: stays at one.
        *script.lock().unwrap() = vec![2];
        assert_eq!(share.look(start + LOOK_EVERY * 20, 1), Some(1));
        // It stopped: one look sees the free CPU.
        *script.lock().unwrap() = vec![1];
        assert_eq!(share.look(start + LOOK_EVERY * 21, 1), Some(2));
        // No count to read: no change.
        script.lock().unwrap().clear();
        assert_eq!(share.look(start + LOOK_EVERY * 22, 1), None);
    }
}

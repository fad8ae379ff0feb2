//! A persistent thread pool for the matmuls of a forward pass.
//!
//! Workers live as long as the pool. A job is a function of a chunk index; every thread (the
//! caller included) claims chunks with one atomic `fetch_add` until none are left, so fast and
//! slow cores both stay busy to the end. Between jobs, workers spin briefly (a decode step issues
//! hundreds of matmuls back to back, and waking a sleeping thread costs more than one of them),
//! then sleep on a condition variable.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps.
const SPIN: Duration = Duration::from_micros(300);

type Job = dyn Fn(usize) + Sync;

/// A fixed set of worker threads that run chunked jobs.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serializes jobs: a second caller while a job runs computes its job alone.
    busy: Mutex<()>,
}

struct Shared {
    /// Bumped once per job; workers wait for it to change.
    generation: AtomicU64,
    /// The current job, lifetime-erased; valid while `running > 0` or the caller is in `run`.
    job: AtomicJob,
    chunks: AtomicUsize,
    next: AtomicUsize,
    /// Workers that have not yet finished the current job.
    running: AtomicUsize,
    sleepers: AtomicUsize,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// A `*const Job` shared between threads.
struct AtomicJob(
    std::sync::atomic::AtomicPtr<()>,
    std::sync::atomic::AtomicPtr<()>,
);

impl AtomicJob {
    fn store(&self, job: *const Job) {
        // SAFETY: a fat pointer is two words (data, vtable); split and rejoined below unchanged.
        let [data, vtable]: [*mut (); 2] = unsafe { std::mem::transmute(job) };
        self.0.store(data, Ordering::Relaxed);
        self.1.store(vtable, Ordering::Relaxed);
    }
    fn load(&self) -> *const Job {
        let parts = [
            self.0.load(Ordering::Relaxed),
            self.1.load(Ordering::Relaxed),
        ];
        // SAFETY: the two words were written by `store` from a valid `*const Job`.
        unsafe { std::mem::transmute::<[*mut (); 2], *const Job>(parts) }
    }
}

impl ThreadPool {
    /// A pool of `threads` threads in all: the caller of [`ThreadPool::run`] plus
    /// `threads - 1` workers (at least one thread).
    pub fn new(threads: usize) -> ThreadPool {
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: AtomicJob(Default::default(), Default::default()),
            chunks: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let workers = (1..threads.max(1))
            .map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("hearth-cpu-{i}"))
                    .spawn(move || worker(&shared))
                    .expect("cannot start a CPU worker thread")
            })
            .collect();
        ThreadPool {
            shared,
            workers,
            busy: Mutex::new(()),
        }
    }

    /// Threads that run a job (workers plus the caller).
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `job(chunk)` for every chunk in `0..chunks` across the pool and returns when all
    /// are done. Chunks run in no particular order, each exactly once.
    pub fn run(&self, chunks: usize, job: &(dyn Fn(usize) + Sync)) {
        if chunks == 0 {
            return;
        }
        let guard = match self.busy.try_lock() {
            Ok(guard) if chunks > 1 && !self.workers.is_empty() => guard,
            _ => {
                (0..chunks).for_each(job);
                return;
            }
        };
        let s = &*self.shared;
        // SAFETY: the pointer is only dereferenced by workers between seeing the new generation
        // and decrementing `running`, and this function waits for `running == 0` before `job`
        // goes out of scope.
        let erased: *const Job =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Job>(job) };
        s.job.store(erased);
        s.chunks.store(chunks, Ordering::Relaxed);
        s.next.store(0, Ordering::Relaxed);
        s.running.store(self.workers.len(), Ordering::Relaxed);
        s.generation.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _lock = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        claim_chunks(s, job);
        while s.running.load(Ordering::Acquire) > 0 {
            std::hint::spin_loop();
        }
        drop(guard);
    }
}

impl ThreadPool {
    /// Runs `job(i, piece)` for every `piece_len`-element piece of `data` (the last may be
    /// shorter) across the pool, as [`ThreadPool::run`] runs chunks.
    pub fn for_each_piece_mut<T: Send>(
        &self,
        data: &mut [T],
        piece_len: usize,
        job: &(dyn Fn(usize, &mut [T]) + Sync),
    ) {
        assert!(piece_len > 0, "pieces must not be empty");
        let len = data.len();
        let base = SharedMut(data.as_mut_ptr());
        self.run(len.div_ceil(piece_len), &|i| {
            let start = i * piece_len;
            let end = len.min(start + piece_len);
            // SAFETY: pieces are disjoint, inside `data`, and each runs exactly once while
            // `run` holds this function (and so the `&mut data` borrow) open.
            let piece = unsafe { std::slice::from_raw_parts_mut(base.at(start), end - start) };
            job(i, piece);
        });
    }
}

/// A pointer into a buffer that the chunks of one [`ThreadPool::run`] write at disjoint
/// positions (outputs of matmuls and attention, pieces of [`ThreadPool::for_each_piece_mut`]).
pub(crate) struct SharedMut<T>(pub(crate) *mut T);
// SAFETY: every user writes only positions no other chunk writes, and `run` returns only after
// all chunks are done, while the caller still holds `&mut` to the buffer; `T: Send` suffices.
unsafe impl<T: Send> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    /// The pointer at `offset` (a method, so closures capture the whole `Sync` wrapper).
    pub(crate) fn at(&self, offset: usize) -> *mut T {
        self.0.wrapping_add(offset)
    }
}

fn claim_chunks(s: &Shared, job: &(dyn Fn(usize) + Sync + '_)) {
    let chunks = s.chunks.load(Ordering::Relaxed);
    loop {
        let chunk = s.next.fetch_add(1, Ordering::Relaxed);
        if chunk >= chunks {
            break;
        }
        job(chunk);
    }
}

fn worker(s: &Shared) {
    let mut seen = 0u64;
    loop {
        let started = Instant::now();
        let mut spins = 0u32;
        loop {
            if s.shutdown.load(Ordering::Acquire) {
                return;
            }
            if s.generation.load(Ordering::Acquire) != seen {
                break;
            }
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(1024) && started.elapsed() > SPIN {
                let mut lock = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, Ordering::SeqCst);
                while s.generation.load(Ordering::SeqCst) == seen
                    && !s.shutdown.load(Ordering::SeqCst)
                {
                    lock = s.wake.wait(lock).unwrap_or_else(|e| e.into_inner());
                }
                s.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
        }
        seen = s.generation.load(Ordering::Acquire);
        // SAFETY: see `ThreadPool::run`: the job outlives every worker's `running` count.
        let job = unsafe { &*s.job.load() };
        claim_chunks(s, job);
        s.running.fetch_sub(1, Ordering::Release);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        {
            let _lock = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("threads", &self.threads())
            .finish()
    }
}

/// Physical cores of this machine (hyper-threads share one core's load/store bandwidth and SIMD
/// units, so they do not help a memory-bound decode). Falls back to the logical CPU count.
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cores = std::collections::HashSet::new();
    for cpu in 0..logical.max(1) * 4 {
        let topology = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let read = |name: &str| std::fs::read_to_string(format!("{topology}/{name}")).ok();
        if let (Some(core), Some(package)) = (read("core_id"), read("physical_package_id")) {
            cores.insert((package.trim().to_owned(), core.trim().to_owned()));
        }
    }
    if cores.is_empty() {
        logical
    } else {
        cores.len().min(logical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_runs_exactly_once() {
        let pool = ThreadPool::new(3);
        for chunks in [0, 1, 2, 7, 1000] {
            let hits: Vec<AtomicUsize> = (0..chunks).map(|_| AtomicUsize::new(0)).collect();
            pool.run(chunks, &|c| {
                hits[c].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "{chunks} chunks"
            );
        }
    }

    #[test]
    fn many_small_jobs_back_to_back_and_after_sleeping() {
        let pool = ThreadPool::new(2);
        let total = AtomicUsize::new(0);
        for round in 0..2000 {
            pool.run(4, &|c| {
                total.fetch_add(c + 1, Ordering::Relaxed);
            });
            if round == 1000 {
                std::thread::sleep(SPIN * 4); // workers go to sleep and must wake again
            }
        }
        assert_eq!(total.load(Ordering::Relaxed), 2000 * 10);
    }

    #[test]
    fn every_piece_is_visited_once_with_its_index() {
        let pool = ThreadPool::new(3);
        let mut data: Vec<usize> = vec![0; 1001];
        pool.for_each_piece_mut(&mut data, 100, &|i, piece| {
            assert!(piece.len() == 100 || (i == 10 && piece.len() == 1));
            for (k, v) in piece.iter_mut().enumerate() {
                *v += i * 100 + k + 1;
            }
        });
        assert!(data.iter().enumerate().all(|(k, &v)| v == k + 1));
    }

    #[test]
    fn single_thread_pool_runs_inline() {
        let pool = ThreadPool::new(1);
        assert_eq!(pool.threads(), 1);
        let total = AtomicUsize::new(0);
        pool.run(5, &|c| {
            total.fetch_add(c, Ordering::Relaxed);
        });
        assert_eq!(total.load(Ordering::Relaxed), 10);
    }

    #[test]
    fn physical_cores_is_at_least_one() {
        assert!(physical_cores() >= 1);
    }
}

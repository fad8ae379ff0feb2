//! A persistent thread pool for the matmuls of a forward pass.
//!
//! Workers live as long as the pool. A job is a function of a chunk index; every thread (the
//! caller included) claims a share of the chunks left until none are left: large claims while
//! much is left (each claim moves one cache line between cores, and one claim per chunk cost
//! SmolLM2-135M about a tenth of its 2-thread decode), single chunks at the end, so fast and
//! slow cores both stay busy to the end. The caller waits only for chunks that were claimed: a
//! worker that the OS has not scheduled yet (another program is busy on its core) simply finds
//! the job finished when it wakes, instead of holding the whole step up for a time slice. (One
//! taken off its core in the middle of a claim holds the step up for what it claimed; with
//! both threads kept at work beside a busy program, decode measured the same as with
//! one-chunk claims.)
//!
//! Between jobs, workers spin briefly (a decode step issues hundreds of jobs back to back, and
//! waking a sleeping thread costs more than one of them), then sleep on a condition variable.
//! A caller whose job is still running elsewhere yields its core after a short spin, so a
//! descheduled worker can finish its chunk.
//!
//! While other programs keep cores busy, fewer threads take part: the caller looks at the
//! machine's runnable threads every few milliseconds ([`super::contention`]) and the workers
//! beyond the count it settles on sleep until it rises again. Which threads run never changes a
//! result: every chunk computes the same sums on whichever thread claims it.
//!
//! The job is published like a sequence lock: one 64-bit word holds a generation (odd while
//! the caller writes the job, even once it is published) and the next unclaimed chunk. A
//! worker claims a chunk with a compare-and-swap that also checks the generation it read the
//! job under, so a worker that read a job just before it was replaced can never run it.

use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::contention::CpuShare;

/// How long an idle worker spins before it sleeps.
const SPIN: Duration = Duration::from_micros(300);

/// A claim takes the chunks left divided by this times the threads taking part (at least
/// one): with 2 threads, a quarter of a job first, then a quarter of the rest. (4 instead of 2
/// gained less in alternating runs.)
const CLAIM_SHARE: usize = 2;

/// Spins of a caller waiting for other threads' chunks before it starts yielding its core.
const WAIT_SPINS: u32 = 2000;

type Job = dyn Fn(usize) + Sync;

/// A fixed set of worker threads that run chunked jobs.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serializes jobs (a second caller while a job runs computes its job alone), and holds
    /// the view of other programs' load that sets how many threads take part (`None`: all,
    /// always).
    busy: Mutex<Option<CpuShare>>,
}

struct Shared {
    /// `generation << 32 | next unclaimed chunk`; the generation is odd while the caller
    /// writes `job` and `chunks`, even once they are published.
    state: AtomicU64,
    /// The current job, lifetime-erased; called only after a successful claim, and the caller
    /// waits for every claimed chunk before `job` goes out of scope.
    job: AtomicJob,
    chunks: AtomicUsize,
    /// Chunks of the current job that have finished.
    done: AtomicUsize,
    /// Idle workers asleep until the next job (not counting those set aside by `active`).
    sleepers: AtomicUsize,
    /// Threads that take part in jobs, the caller included: workers `1..active`.
    active: AtomicUsize,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// A `*const Job` shared between threads.
struct AtomicJob(AtomicPtr<()>, AtomicPtr<()>);

impl AtomicJob {
    fn store(&self, job: *const Job) {
        // SAFETY: a fat pointer is two words (data, vtable); split and rejoined below unchanged.
        let [data, vtable]: [*mut (); 2] = unsafe { std::mem::transmute(job) };
        self.0.store(data, Ordering::Relaxed);
        self.1.store(vtable, Ordering::Relaxed);
    }
    /// The two words as last stored; only meaningful once a claim under the generation they
    /// were read in succeeds (see [`claim_chunks`]).
    fn load(&self) -> [*mut (); 2] {
        [
            self.0.load(Ordering::Relaxed),
            self.1.load(Ordering::Relaxed),
        ]
    }
}

fn generation(state: u64) -> u64 {
    state >> 32
}

impl ThreadPool {
    /// A pool of `threads` threads in all: the caller of [`ThreadPool::run`] plus
    /// `threads - 1` workers (at least one thread). Fewer take part while other programs keep
    /// this machine's CPUs busy.
    pub fn new(threads: usize) -> ThreadPool {
        ThreadPool::with_share(threads, Some(CpuShare::of_this_machine(threads)))
    }

    /// A pool whose `threads` threads all take part in every job, however busy the machine
    /// (to measure what adapting gains, and for tests that oversubscribe on purpose).
    pub fn fixed(threads: usize) -> ThreadPool {
        ThreadPool::with_share(threads, None)
    }

    pub(crate) fn with_share(threads: usize, share: Option<CpuShare>) -> ThreadPool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            state: AtomicU64::new(0),
            job: AtomicJob(Default::default(), Default::default()),
            chunks: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            active: AtomicUsize::new(threads),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let workers = (1..threads)
            .map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("hearth-cpu-{i}"))
                    .spawn(move || worker(&shared, i))
                    .expect("cannot start a CPU worker thread")
            })
            .collect();
        ThreadPool {
            shared,
            workers,
            busy: Mutex::new(share),
        }
    }

    /// Threads in the pool (workers plus the caller).
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Threads taking part in jobs now (all of them unless other programs keep CPUs busy).
    pub fn active_threads(&self) -> usize {
        self.shared.active.load(Ordering::Relaxed)
    }

    /// Runs `job(chunk)` for every chunk in `0..chunks` across the pool and returns when all
    /// are done. Chunks run in no particular order, each exactly once.
    ///
    /// # Panics
    ///
    /// If `chunks` does not fit in 32 bits.
    pub fn run(&self, chunks: usize, job: &(dyn Fn(usize) + Sync)) {
        if chunks == 0 {
            return;
        }
        assert!(
            chunks <= u32::MAX as usize,
            "pool: {chunks} chunks is too many"
        );
        let s = &*self.shared;
        let mut guard = match self.busy.try_lock() {
            Ok(guard) if !self.workers.is_empty() => guard,
            _ => {
                (0..chunks).for_each(job);
                return;
            }
        };
        if let Some(share) = guard.as_mut() {
            let asleep = s.sleepers.load(Ordering::Relaxed);
            let ours = s.active.load(Ordering::Relaxed).saturating_sub(asleep);
            if let Some(active) = share.look(Instant::now(), ours.max(1)) {
                set_active(s, active);
            }
        }
        if chunks == 1 || s.active.load(Ordering::Relaxed) == 1 {
            (0..chunks).for_each(job);
            return;
        }
        // Only this caller writes `state` outside of claims, and no chunk of the last job is
        // left, so its generation is even and stable here.
        let generation = generation(s.state.load(Ordering::Relaxed)) + 2;
        s.state.store((generation - 1) << 32, Ordering::Relaxed);
        fence(Ordering::Release);
        // SAFETY: the pointer is called only by a thread that claimed one of this job's chunks,
        // and this function waits for every chunk to finish before `job` goes out of scope.
        let erased: *const Job =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Job>(job) };
        s.job.store(erased);
        s.chunks.store(chunks, Ordering::Relaxed);
        s.done.store(0, Ordering::Relaxed);
        s.state.store(generation << 32, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _lock = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        claim_chunks(s, generation);
        let mut spins = 0u32;
        while s.done.load(Ordering::Acquire) < chunks {
            if spins < WAIT_SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
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

/// Claims and runs chunks of the job published as `generation` until none are left (or another
/// job replaced it).
fn claim_chunks(s: &Shared, generation: u64) {
    let job = s.job.load();
    let chunks = s.chunks.load(Ordering::Relaxed);
    // The reads above happen before the claim below checks that the job was not replaced
    // meanwhile (the reader's half of a sequence lock).
    fence(Ordering::Acquire);
    let threads = s.active.load(Ordering::Relaxed).max(1);
    let mut state = s.state.load(Ordering::Relaxed);
    loop {
        let next = (state & u64::from(u32::MAX)) as usize;
        if self::generation(state) != generation || next >= chunks {
            return;
        }
        let take = ((chunks - next) / (CLAIM_SHARE * threads)).max(1);
        match s.state.compare_exchange_weak(
            state,
            state + take as u64,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                // SAFETY: the claim succeeded under the generation `job` was read in, so it is
                // the published job, and its caller waits for these chunks before returning.
                let job = unsafe { &*std::mem::transmute::<[*mut (); 2], *const Job>(job) };
                (next..next + take).for_each(job);
                s.done.fetch_add(take, Ordering::Release);
                state = s.state.load(Ordering::Relaxed);
            }
            Err(now) => state = now,
        }
    }
}

/// Lets `active` threads take part from the next job on, waking set-aside workers if it grew.
fn set_active(s: &Shared, active: usize) {
    let before = s.active.swap(active, Ordering::SeqCst);
    if active > before {
        let _lock = s.lock.lock().unwrap_or_else(|e| e.into_inner());
        s.wake.notify_all();
    }
}

/// Worker `index` (1 and up; the caller is thread 0).
fn worker(s: &Shared, index: usize) {
    let mut seen = 0u64;
    // A published generation this worker has not taken part in yet.
    let fresh = |state: u64, seen: u64| {
        let g = generation(state);
        g != seen && g.is_multiple_of(2)
    };
    let set_aside = || index >= s.active.load(Ordering::SeqCst);
    loop {
        if s.shutdown.load(Ordering::Acquire) {
            return;
        }
        if set_aside() {
            // Not counted among the sleepers: jobs need not wake it, only a larger `active`.
            let mut lock = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            while set_aside() && !s.shutdown.load(Ordering::SeqCst) {
                lock = s.wake.wait(lock).unwrap_or_else(|e| e.into_inner());
            }
        }
        let started = Instant::now();
        let mut spins = 0u32;
        let mut state = s.state.load(Ordering::Acquire);
        while !fresh(state, seen) {
            if s.shutdown.load(Ordering::Acquire) {
                return;
            }
            if set_aside() {
                break;
            }
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(1024) && started.elapsed() > SPIN {
                let mut lock = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, Ordering::SeqCst);
                while !fresh(s.state.load(Ordering::SeqCst), seen)
                    && !s.shutdown.load(Ordering::SeqCst)
                {
                    lock = s.wake.wait(lock).unwrap_or_else(|e| e.into_inner());
                }
                s.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
            state = s.state.load(Ordering::Acquire);
        }
        if fresh(state, seen) && !set_aside() {
            seen = generation(state);
            claim_chunks(s, seen);
        }
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

    /// More threads than cores: workers are descheduled mid-job and late for the next one,
    /// and every chunk still runs once, so per-chunk float sums equal a one-thread run's.
    #[test]
    fn an_oversubscribed_pool_computes_the_single_thread_sums() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let data: Vec<f32> = (0..4096).map(|i| (i as f32 * 0.37).sin()).collect();
        let sums = |pool: &ThreadPool, chunks: usize| {
            let mut out = vec![0.0f32; chunks];
            pool.for_each_piece_mut(&mut out, 1, &|c, sum| {
                let piece = &data[(c * 61) % 4000..][..96];
                sum[0] = piece.iter().fold(0.0, |acc, v| acc + v * (c as f32 + 0.5));
            });
            out
        };
        let one = ThreadPool::new(1);
        let many = ThreadPool::fixed(4 * cores + 1);
        for round in 0..3000 {
            let chunks = 1 + round % 37;
            assert_eq!(sums(&many, chunks), sums(&one, chunks), "round {round}");
        }
    }

    /// A pool that sets workers aside while another program is busy, and takes them back when
    /// it stops, computes the same sums throughout.
    #[test]
    fn workers_set_aside_and_taken_back_compute_the_same_sums() {
        use super::super::contention::LOOKS;
        use std::time::Duration;
        // The machine's runnable threads at each look (popped from the end): the pool's 2 and
        // one other program for LOOKS looks, then the pool's 1 and the other, then the pool alone.
        let mut script = vec![1; 40];
        script.extend([2; 40]);
        script.extend([3; LOOKS]);
        let script = Mutex::new(script);
        let runnable = Box::new(move || script.lock().unwrap().pop());
        let share = CpuShare::new(2, 2, Duration::ZERO, runnable);
        let pool = ThreadPool::with_share(2, Some(share));
        let one = ThreadPool::fixed(1);
        let data: Vec<f32> = (0..512).map(|i| (i as f32 * 0.11).cos()).collect();
        let sums = |pool: &ThreadPool| {
            let mut out = vec![0.0f32; 9];
            pool.for_each_piece_mut(&mut out, 1, &|c, sum| {
                sum[0] = data[c * 50..][..64]
                    .iter()
                    .fold(c as f32, |acc, v| acc + v * v);
            });
            out
        };
        let mut active = Vec::new();
        for _ in 0..LOOKS + 80 {
            assert_eq!(sums(&pool), sums(&one));
            active.push(pool.active_threads());
        }
        assert_eq!(
            active[..LOOKS - 1],
            [2; LOOKS - 1],
            "a burst is not a busy program"
        );
        assert_eq!(active[LOOKS - 1..LOOKS + 40], [1; 41]);
        assert_eq!(active[LOOKS + 40..], [2; 40]);
    }

    #[test]
    fn physical_cores_is_at_least_one() {
        assert!(physical_cores() >= 1);
    }
}

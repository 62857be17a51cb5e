//! Boundary fuzzer of the C ABI: random (valid and invalid) params for every exported function,
//! all tensors inside one guarded buffer. Per case: no crash; status in the documented set;
//! every failure has a non-empty `ccv1d_last_error()` and leaves the whole buffer byte-identical;
//! a success writes only bytes of its declared output elements (guards always intact); calls
//! the fuzzer's own model (tests/fuzz/model.rs) knows to be invalid fail, and mutations that fix
//! the status (struct_size, codes, width, negative dims, NULL required pointers, negative
//! strides, index contents) get exactly that status.
//!
//! `CCV1D_FUZZ_CASES` (default 50000), `CCV1D_FUZZ_SEED` (default: from the clock, printed).
//! Reproduce a failure with the printed seed; `CCV1D_FUZZ_VERBOSE=1` prints every case.

#[path = "fuzz/arena.rs"]
mod arena;
#[path = "fuzz/gen.rs"]
mod gen;
#[path = "fuzz/model.rs"]
mod model;

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void, CStr};
use std::time::Instant;

use causal_conv1d::capi::*;
use causal_conv1d::error::*;
use causal_conv1d::harness::{parse_u64, Rng};
use causal_conv1d::params::*;

use arena::{Arena, GUARD, INNER};
use gen::{Call, Expect};
use model::{Described, Role};

/// Every status the library documents (src/error.rs).
const DOCUMENTED: [ccv1d_status; 19] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 20, 21, 22, 23, 99];
/// Accepted calls are kept this small (elements of work, elements per tensor).
const MAX_WORK: i128 = 1 << 14;

pub fn describe(c: &Call) -> Described {
    match c {
        Call::Fwd(p) => model::fwd(p),
        Call::Bwd(p) | Call::WsSize(p, _) => model::bwd(p),
        Call::Update(p) => model::update(p),
    }
}

fn read_i32(t: &ccv1d_tensor, i: i64, n: i64) -> i32 {
    let off = if n > 1 { i * t.stride[0] } else { 0 };
    unsafe { std::ptr::read_unaligned((t.data as *const i32).offset(off as isize)) }
}

/// The CPU backend's index-content rules; None when they do not apply or cannot be read safely.
fn content_status(c: &Call, d: &Described, inner: (usize, usize)) -> Option<ccv1d_status> {
    let fits = |name: &str| {
        let decl = d.decls.iter().find(|x| x.name == name)?;
        if !decl.present() {
            return Some(None);
        }
        match model::extent(decl) {
            Ok(Some((lo, hi))) if lo >= inner.0 && hi <= inner.1 && decl.dims[0] <= MAX_WORK as i64 => Some(Some(decl.t)),
            Ok(None) => Some(None),
            _ => None,
        }
    };
    let (cu, si, n, l, slots) = match c {
        Call::Fwd(p) => (fits("cu_seqlens")?, fits("state_indices")?, p.num_seqs, p.seqlen, p.num_state_slots),
        Call::Bwd(p) | Call::WsSize(p, _) => (fits("cu_seqlens")?, fits("state_indices")?, p.num_seqs, p.seqlen, p.num_state_slots),
        Call::Update(p) => {
            let csi = fits("conv_state_indices")?;
            let slots = if p.num_state_slots == 0 { p.batch } else { p.num_state_slots };
            if let Some(t) = csi {
                if (0..p.batch).any(|b| read_i32(&t, b, p.batch) as i64 >= slots) {
                    return Some(CCV1D_ERR_INDEX);
                }
            }
            return Some(CCV1D_OK);
        }
    };
    let n = match (cu, c) {
        (Some(t), _) => {
            let v: Vec<i64> = (0..=n).map(|i| read_i32(&t, i, n + 1) as i64).collect();
            if v[0] != 0 || v.windows(2).any(|w| w[1] < w[0]) || v[n as usize] != l {
                return Some(CCV1D_ERR_CU_SEQLENS);
            }
            n
        }
        (None, Call::Fwd(p)) => p.batch,
        (None, Call::Bwd(p) | Call::WsSize(p, _)) => p.batch,
        _ => unreachable!(),
    };
    let slots = if slots == 0 { n } else { slots };
    if let Some(t) = si {
        if (0..n).any(|i| read_i32(&t, i, n) as i64 >= slots) {
            return Some(CCV1D_ERR_INDEX);
        }
    }
    Some(CCV1D_OK)
}

/// Whether to make the call, and whether the model says it must fail.
enum Plan {
    Run { must_fail: bool },
    /// A view reaches outside the buffer (or asks for too much work) and the model cannot prove
    /// the library refuses it: the library cannot know buffer sizes, so such a call is the
    /// caller's bug, not a test.
    Skip,
}

fn plan(c: &Call, d: &Described, inner: (usize, usize), cpu_side: bool) -> Plan {
    let mut must_fail = d.scalar_invalid || model::bad_dtype(&d.decls);
    let mut all_fit = true;
    let mut host_index_safe = true;
    for decl in d.decls.iter().filter(|x| x.present()) {
        match model::extent(decl) {
            Err(()) => must_fail = true,
            Ok(None) => {}
            Ok(Some((lo, hi))) => {
                let fits = lo >= inner.0 && hi <= inner.1 && model::numel(decl) <= MAX_WORK;
                all_fit &= fits;
                if decl.role == Role::HostIndex {
                    host_index_safe &= fits;
                }
            }
        }
    }
    if cpu_side && host_index_safe && !must_fail {
        must_fail = content_status(c, d, inner).is_some_and(|s| s != CCV1D_OK);
    }
    if must_fail && host_index_safe {
        Plan::Run { must_fail }
    } else if !must_fail && all_fit && d.work <= MAX_WORK {
        Plan::Run { must_fail }
    } else {
        Plan::Skip
    }
}

fn call(c: &Call, null_params: bool) -> ccv1d_status {
    unsafe {
        match c {
            Call::Fwd(p) => ccv1d_fwd(if null_params { std::ptr::null() } else { p }, std::ptr::null_mut()),
            Call::Bwd(p) => ccv1d_bwd(if null_params { std::ptr::null() } else { p }, std::ptr::null_mut()),
            Call::WsSize(p, bytes) => ccv1d_bwd_workspace_size(if null_params { std::ptr::null() } else { p }, *bytes as *mut usize),
            Call::Update(p) => ccv1d_update(if null_params { std::ptr::null() } else { p }, std::ptr::null_mut()),
        }
    }
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(ccv1d_last_error()) }.to_string_lossy().into_owned()
}

#[derive(Default)]
struct Stats {
    cases: u64,
    skipped: u64,
    by_op: BTreeMap<&'static str, u64>,
    statuses: BTreeMap<ccv1d_status, u64>,
    ok_computed: u64,
    exact_checked: u64,
    must_fail_checked: u64,
}

/// Check the invariants after a call; panics with the case description on a violation.
fn check(a: &mut Arena, c: &Call, d: &Described, status: ccv1d_status, what: &str) {
    assert!(DOCUMENTED.contains(&status), "{what}: status {status} is not documented");
    assert_ne!(status, CCV1D_ERR_INTERNAL, "{what}: INTERNAL (caught panic): {}", last_error());
    let msg = last_error();
    let changed = a.changed();
    if status != CCV1D_OK {
        assert!(!msg.trim().is_empty(), "{what}: status {status} with an empty ccv1d_last_error()");
        assert!(changed.is_empty(), "{what}: failed with {status} ({msg}) but changed {} bytes, first at offset {}", changed.len(), changed[0]);
        return;
    }
    assert!(msg.is_empty(), "{what}: OK but ccv1d_last_error() = {msg:?}");
    if changed.is_empty() {
        return;
    }
    let base = a.base();
    let mut allowed = vec![false; a.bytes().len()];
    for decl in d.decls.iter().filter(|x| x.role == Role::Out && x.present()) {
        model::element_bytes(decl, |lo, hi| {
            for b in lo..hi {
                if b >= base && b < base + allowed.len() {
                    allowed[b - base] = true;
                }
            }
        });
    }
    if let Call::WsSize(_, bytes) = c {
        for b in *bytes..*bytes + 8 {
            allowed[b - base] = true;
        }
    }
    for &i in &changed {
        assert!(i >= GUARD && i < GUARD + INNER, "{what}: OK but a guard byte changed (offset {i})");
        assert!(allowed[i], "{what}: OK but wrote byte {i} outside every declared output element");
    }
    a.accept(&changed);
}

fn one_case(rng: &mut Rng, a: &mut Arena, st: &mut Stats, nodev: bool, verbose: bool) {
    a.reset(rng);
    let op = rng.below(4);
    let built = match op {
        0 => gen::fwd(rng, a).map(Call::Fwd),
        1 => gen::bwd(rng, a).map(Call::Bwd),
        2 => gen::bwd(rng, a).and_then(|p| Some(Call::WsSize(p, a.alloc(rng, 8, 8, 0)?))),
        _ => gen::update(rng, a).map(Call::Update),
    };
    let Some(mut c) = built else {
        st.skipped += 1;
        return;
    };
    // About a third of the cases stay valid; the rest get one to three mutations.
    let n_mut = match rng.below(10) {
        0..=2 => 0,
        3..=7 => 1,
        _ => 2 + rng.below(2),
    };
    let expects: Vec<Expect> = (0..n_mut).map(|_| gen::mutate(rng, a, &mut c, nodev)).collect();
    let null_params = rng.chance(0.01);
    let d = describe(&c);
    let inner = a.inner();
    let mut copy = c;
    let cpu_side = matches!(*gen::header(&mut copy).1, CCV1D_BACKEND_CPU | CCV1D_BACKEND_AUTO);
    let must_fail = match plan(&c, &d, inner, cpu_side) {
        Plan::Skip if !null_params => {
            st.skipped += 1;
            return;
        }
        Plan::Skip => true,
        Plan::Run { must_fail } => must_fail || null_params,
    };
    let name = ["fwd", "bwd", "bwd_workspace_size", "update"][op];
    let status = call(&c, null_params);
    let what = format!("case {} ({name}, mutations {expects:?}, null params {null_params})", st.cases);
    if verbose {
        println!("{what}: status {status} {}", last_error());
    }
    check(a, &c, &d, status, &what);
    if null_params {
        assert_eq!(status, CCV1D_ERR_NULL_POINTER, "{what}");
    } else {
        // Only a single mutation fixes the status (a second one may undo or outrank it).
        let want = match expects.as_slice() {
            [] => Some(CCV1D_OK),
            [Expect::Status(s)] => Some(*s),
            [Expect::Model] => content_status(&c, &d, inner),
            _ => None,
        };
        if let Some(w) = want {
            assert_eq!(status, w, "{what}: expected {w}, got {status}: {}", last_error());
            st.exact_checked += 1;
        }
    }
    if must_fail {
        assert_ne!(status, CCV1D_OK, "{what}: the call is invalid by the documented rules but was accepted");
        st.must_fail_checked += 1;
    }
    if status == CCV1D_OK && op != 2 {
        st.ok_computed += 1;
    }
    st.cases += 1;
    *st.by_op.entry(name).or_default() += 1;
    *st.statuses.entry(status).or_default() += 1;
}

/// The small functions, with random arguments. Without a GPU they answer NO_DEVICE (or OK for
/// the no-op forms); they must never crash or write anything but their out-parameter.
fn small_functions(rng: &mut Rng, a: &mut Arena, st: &mut Stats, no_driver: bool) {
    let s = rng.next_u64() as i32;
    let name = unsafe { CStr::from_ptr(ccv1d_status_string(if rng.chance(0.5) { s } else { rng.pick(&DOCUMENTED) })) };
    assert!(!name.to_bytes().is_empty());
    let known = DOCUMENTED.contains(&s);
    let name_s = unsafe { CStr::from_ptr(ccv1d_status_string(s)) }.to_str().unwrap();
    assert_eq!(name_s == "UNKNOWN_STATUS", !known, "status_string({s}) = {name_s}");
    assert!(!unsafe { CStr::from_ptr(ccv1d_version()) }.to_bytes().is_empty());
    assert!(ccv1d_backends_compiled() & CCV1D_HAVE_CPU != 0);
    if !no_driver {
        return; // random pointers to a real driver are not a test of this library
    }
    a.reset(rng);
    let slot = a.alloc(rng, 8, 8, 0).unwrap();
    let (lo, hi) = a.inner();
    let ptrs = [0usize, slot, lo + rng.below(hi - lo), 8, usize::MAX - 7];
    let r = rng.next_u64() as usize;
    let bytes = rng.pick(&[0usize, 1, 64, usize::MAX, r]);
    let empty = Described { decls: Vec::new(), scalar_invalid: false, work: 0 };
    let out8 = |slot: usize| model::Decl { name: "out", t: ccv1d_tensor { data: slot as *mut _, dtype: CCV1D_DTYPE_F32, stride: [1, 0, 0] }, dims: [2, 1, 1], ndim: 1, role: Role::Out, kind: model::Kind::Float };
    let (status, what, d) = match rng.below(5) {
        0 => {
            let p = if rng.chance(0.5) { 0 } else { slot };
            let st = unsafe { ccv1d_device_count(p as *mut c_int) };
            assert_ne!(st, CCV1D_OK, "device_count without a GPU");
            (st, "ccv1d_device_count", empty)
        }
        1 => {
            let p = if rng.chance(0.3) { 0 } else { slot };
            let st = unsafe { ccv1d_malloc(p as *mut *mut c_void, bytes) };
            if p != 0 && bytes == 0 {
                assert_eq!(st, CCV1D_OK, "malloc(0) is a no-op");
            } else {
                assert_ne!(st, CCV1D_OK, "malloc without a GPU");
            }
            (st, "ccv1d_malloc", Described { decls: vec![out8(slot)], scalar_invalid: false, work: 0 })
        }
        2 => {
            let p = rng.pick(&ptrs);
            let st = unsafe { ccv1d_free(p as *mut c_void) };
            assert_eq!(st == CCV1D_OK, p == 0, "free({p:#x}) without a GPU");
            (st, "ccv1d_free", empty)
        }
        3 => {
            let (dst, src) = (rng.pick(&ptrs), rng.pick(&ptrs));
            let st = unsafe { ccv1d_memcpy(dst as *mut c_void, src as *const c_void, bytes, rng.pick(&ptrs) as *mut c_void) };
            assert_eq!(st == CCV1D_OK, bytes == 0, "memcpy({dst:#x}, {src:#x}, {bytes}) without a GPU");
            (st, "ccv1d_memcpy", empty)
        }
        _ => {
            let st = unsafe { ccv1d_synchronize(rng.pick(&ptrs) as *mut c_void) };
            assert_ne!(st, CCV1D_OK, "synchronize without a GPU");
            (st, "ccv1d_synchronize", empty)
        }
    };
    check(a, &Call::Update(unsafe { std::mem::zeroed() }), &d, status, what);
    st.cases += 1;
    *st.by_op.entry(what).or_default() += 1;
    *st.statuses.entry(status).or_default() += 1;
}

/// A params struct whose `struct_size` says it is smaller than this library's, ending right
/// before an inaccessible page: the library must read only `struct_size` and refuse.
fn short_struct_at_page_end(rng: &mut Rng) {
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let m = libc::mmap(std::ptr::null_mut(), 2 * page, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        assert_ne!(m, libc::MAP_FAILED);
        assert_eq!(libc::mprotect((m as usize + page) as *mut c_void, page, libc::PROT_NONE), 0);
        for size in [4u32, 8, 12, 16, 64, 100, 4 + 4 * rng.below(40) as u32] {
            let p = (m as usize + page - size as usize) as *mut u32;
            p.write_unaligned(size);
            let s = [
                ccv1d_fwd(p as *const _, std::ptr::null_mut()),
                ccv1d_bwd(p as *const _, std::ptr::null_mut()),
                ccv1d_update(p as *const _, std::ptr::null_mut()),
            ];
            assert_eq!(s, [CCV1D_ERR_STRUCT_SIZE; 3], "struct_size {size}");
            assert!(last_error().contains("struct_size"), "{}", last_error());
        }
        libc::munmap(m, 2 * page);
    }
}

#[test]
fn fuzz_c_abi() {
    let cases: u64 = std::env::var("CCV1D_FUZZ_CASES").ok().and_then(|s| parse_u64(&s)).unwrap_or(50_000);
    let seed = std::env::var("CCV1D_FUZZ_SEED")
        .ok()
        .and_then(|s| parse_u64(&s))
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    let verbose = std::env::var("CCV1D_FUZZ_VERBOSE").is_ok_and(|v| v == "1");
    println!("fuzz: CCV1D_FUZZ_SEED={seed} CCV1D_FUZZ_CASES={cases}");
    let mut count: c_int = -1;
    let dc = unsafe { ccv1d_device_count(&mut count) };
    let nodev = dc != CCV1D_OK || count <= 0;
    // Random pointers go to the memory functions only when no GPU driver answers at all.
    let no_driver = dc != CCV1D_OK;
    let mut rng = Rng::new(seed);
    let mut a = Arena::new(&mut rng);
    let mut st = Stats::default();
    let t0 = Instant::now();
    short_struct_at_page_end(&mut rng);
    while st.cases < cases {
        if rng.chance(0.05) {
            small_functions(&mut rng, &mut a, &mut st, no_driver);
        } else {
            one_case(&mut rng, &mut a, &mut st, nodev, verbose);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("fuzz: {} cases in {secs:.1} s ({} generated calls skipped: a view outside the buffer or too much work, not provably invalid)", st.cases, st.skipped);
    println!("fuzz: per function: {:?}", st.by_op);
    println!(
        "fuzz: {} accepted fwd/bwd/update calls computed; {} exact-status expectations and {} must-fail expectations checked",
        st.ok_computed, st.exact_checked, st.must_fail_checked
    );
    let hist: Vec<String> = st
        .statuses
        .iter()
        .map(|(s, n)| format!("{}={n}", unsafe { CStr::from_ptr(ccv1d_status_string(*s)) }.to_str().unwrap()))
        .collect();
    println!("fuzz: statuses: {}", hist.join(" "));
    // A generator that stopped reaching the compute or the error paths would make this test
    // pass without testing anything.
    assert!(st.ok_computed * 10 >= st.cases, "fewer than 10% of the calls reached the compute");
    assert!(st.statuses.len() >= 10, "only {} distinct statuses", st.statuses.len());
}

/// Memory ending right before an inaccessible page: `bytes` usable bytes returned, and the
/// mapping to unmap. Reads past the end fault instead of going unnoticed.
unsafe fn page_end(bytes: usize) -> (*mut u8, *mut c_void, usize) {
    let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
    let len = bytes.next_multiple_of(page) + page;
    let m = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
    assert_ne!(m, libc::MAP_FAILED);
    assert_eq!(libc::mprotect((m as usize + len - page) as *mut c_void, page, libc::PROT_NONE), 0);
    ((m as usize + len - page - bytes) as *mut u8, m, len)
}

/// num_seqs = INT64_MAX with cu_seqlens: cu_seqlens has num_seqs+1 entries, which overflows
/// int64; the library must say so before reading any of it. The entries that exist are
/// increasing up to an inaccessible page, so a validation loop that trusts num_seqs faults.
#[test]
fn num_seqs_overflow_is_refused_before_reading_cu_seqlens() {
    unsafe {
        let n_cu = 1024usize;
        let (cu, m, len) = page_end(4 * n_cu);
        for i in 0..n_cu {
            (cu as *mut i32).add(i).write(i as i32);
        }
        let mut x = [0f32; 4];
        let mut w = [0f32; 4];
        let mut out = [0f32; 4];
        let t = |p: *mut f32, s: [i64; 3]| ccv1d_tensor { data: p as *mut c_void, dtype: CCV1D_DTYPE_F32, stride: s };
        let mut p: ccv1d_fwd_params = std::mem::zeroed();
        p.struct_size = std::mem::size_of::<ccv1d_fwd_params>() as u32;
        p.backend = CCV1D_BACKEND_CPU;
        (p.batch, p.dim, p.seqlen, p.width) = (1, 1, 4, 4);
        p.x = t(x.as_mut_ptr(), [4, 4, 1]);
        p.weight = t(w.as_mut_ptr(), [4, 1, 0]);
        p.out = t(out.as_mut_ptr(), [4, 4, 1]);
        p.cu_seqlens = ccv1d_tensor { data: cu as *mut c_void, dtype: CCV1D_DTYPE_I32, stride: [1, 0, 0] };
        for n in [i64::MAX, i64::MAX - 1] {
            p.num_seqs = n;
            let s = ccv1d_fwd(&p, std::ptr::null_mut());
            assert_ne!(s, CCV1D_OK, "num_seqs {n}");
            println!("num_seqs {n}: {} ({})", CStr::from_ptr(ccv1d_status_string(s)).to_str().unwrap(), last_error());
        }
        libc::munmap(m, len);
    }
}

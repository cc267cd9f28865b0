//! gpumon's own code and constants brought in a page at a time, not 64 KiB at a time.
//!
//! A read fault on a file mapping maps the page touched and, with it, every page of the
//! same aligned 64 KiB block that is in the page cache ("fault-around"); a binary that was
//! just installed, copied or run is wholly in the page cache. The functions a watch runs
//! are spread thin over gpumon's code: fat LTO lays code out by crate and by first use, not
//! by what runs together. Measured on a watch at 1 s (callgrind and /proc/PID/pagemap,
//! docs/performance.md): its loop runs 0.5 MB of functions on 263 pages, which lie in 53 of
//! the code's 66 blocks; start and loop together touch 1.65 MB of pages, and fault-around
//! made 3.6 to 3.9 MB of the 4.2 MB resident.
//!
//! Fault-around never crosses the edge of a mapping, and the kernel merges two neighbouring
//! mappings only when everything about them is alike. Advising every other page of the
//! read-only segments `MADV_RANDOM` makes each page a mapping of its own, so a fault maps
//! that page alone. `MADV_RANDOM` changes nothing but read-ahead, which only matters when
//! the file is not cached: a fault on such a page then reads that page from disk instead of
//! the 128 KiB around it. (`MADV_RANDOM` on the whole segment would not do: the kernel's
//! fault-around does not look at it.)
//!
//! What it costs: about 2,000 more mappings in /proc/PID/maps (kernel memory, about 0.4 MB
//! of `vm_area_struct`s, which the resident set does not count), 2 ms of madvise calls at
//! start (`gpumon --version` 1.6 ms before, 3.7 ms after; about 10 ms in a debug build, whose
//! segments are 26 MB), and a minor fault for each page when it first runs. The writable
//! segment (data, and the part made read-only after relocation) is left alone: its pages
//! are the process's own copies, not the file's.

/// Splits the read-only segments of the executable that holds this function into mappings
/// of one page each. Best effort: it stops at the first refusal (an older kernel, or the
/// limit on mappings, `vm.max_map_count`, reached), and gpumon runs the same either way.
pub fn one_page_per_fault() {
    let mut segments = Vec::new();
    own_readonly_segments(&mut segments);
    for (start, end) in segments {
        if !split(start, end) {
            return;
        }
    }
}

/// Advises every other page of `[start, end)` (page-aligned) `MADV_RANDOM`, from the first.
/// False when the kernel refused.
fn split(start: usize, end: usize) -> bool {
    let page = page();
    let mut at = start;
    while at < end {
        // SAFETY: the page lies in a mapping of this process's executable; MADV_RANDOM only
        // sets how the kernel reads ahead for it, and leaves its contents and protection as
        // they are.
        if unsafe { libc::madvise(at as *mut libc::c_void, page, libc::MADV_RANDOM) } != 0 {
            return false;
        }
        at += 2 * page;
    }
    true
}

/// The page-aligned spans of the read-only `PT_LOAD` segments of the object that holds this
/// very function (the gpumon binary; in tests, the test binary).
fn own_readonly_segments(out: &mut Vec<(usize, usize)>) {
    struct Search<'a> {
        marker: usize,
        out: &'a mut Vec<(usize, usize)>,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader hands a valid `dl_phdr_info` for the call, and `data` is the
        // `Search` passed to `dl_iterate_phdr` below, alive for its whole run.
        let (info, search) = unsafe { (&*info, &mut *data.cast::<Search>()) };
        // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers of this object.
        let phdrs =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        let base = info.dlpi_addr as usize;
        let span = |p: &libc::Elf64_Phdr| {
            let start = base + p.p_vaddr as usize;
            (start, start + p.p_memsz as usize)
        };
        let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
        if !loads().any(|p| (span(p).0..span(p).1).contains(&search.marker)) {
            return 0;
        }
        let page = page();
        for p in loads().filter(|p| p.p_flags & libc::PF_W == 0) {
            let (s, e) = span(p);
            // Out to whole pages: where a neighbouring segment shares an edge page, the
            // advice reaches its mapping too, and read-ahead is all it changes there.
            let (s, e) = (s & !(page - 1), (e + page - 1) & !(page - 1));
            if s < e {
                search.out.push((s, e));
            }
        }
        1
    }
    let mut search = Search {
        marker: own_readonly_segments as *const () as usize,
        out,
    };
    // SAFETY: `each` only reads what the loader hands it and writes into `search`.
    unsafe {
        libc::dl_iterate_phdr(Some(each), (&mut search as *mut Search).cast());
    }
}

fn page() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p)
        .ok()
        .filter(|&p| p.is_power_of_two())
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of `n` pages from `start` are mapped in this process (/proc/self/pagemap's
    /// present bit, readable without privileges).
    fn present(start: usize, n: usize) -> Vec<bool> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open("/proc/self/pagemap").expect("pagemap");
        f.seek(SeekFrom::Start((start / page() * 8) as u64))
            .expect("seek");
        let mut buf = vec![0u8; n * 8];
        f.read_exact(&mut buf).expect("read pagemap");
        buf.chunks(8)
            .map(|e| u64::from_le_bytes(e.try_into().expect("8 bytes")) >> 63 == 1)
            .collect()
    }

    /// Whether each of `n` pages from `start` is in the page cache.
    fn cached(start: usize, n: usize) -> Vec<bool> {
        let mut v = vec![0u8; n];
        // SAFETY: the range lies in a mapping of this process; mincore writes n bytes.
        let r = unsafe { libc::mincore(start as *mut libc::c_void, n * page(), v.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore");
        v.iter().map(|b| b & 1 == 1).collect()
    }

    #[test]
    fn the_readonly_segments_are_found_page_aligned() {
        let mut r = Vec::new();
        own_readonly_segments(&mut r);
        let marker = own_readonly_segments as *const () as usize;
        assert!(
            r.iter().any(|&(s, e)| (s..e).contains(&marker)),
            "the code segment, which holds this function, is among them: {r:x?}"
        );
        for &(s, e) in &r {
            assert!(s < e && s % page() == 0 && e % page() == 0, "{s:x}-{e:x}");
        }
        assert!(r.len() >= 2, "code and constants: {r:x?}");
    }

    /// The point of the module, on this test binary: in a 64 KiB block of its code that
    /// nothing has run and that is all in the page cache, reading one page after `split`
    /// maps that page, not the block. Without `split` all 16 pages come in at once (the
    /// kernel's fault-around); other tests running meanwhile could bring in a page or two of
    /// their own, hence "fewer than half" rather than "exactly one".
    #[test]
    fn a_fault_in_a_split_segment_maps_one_page() {
        // Every page of the file in the page cache, as after an install: what fault-around
        // maps from.
        std::fs::read("/proc/self/exe").expect("read own executable");
        let block = 64 * 1024;
        let n = block / page();
        let mut r = Vec::new();
        own_readonly_segments(&mut r);
        let marker = own_readonly_segments as *const () as usize;
        let &(s, e) = r
            .iter()
            .find(|&&(s, e)| (s..e).contains(&marker))
            .expect("code segment");
        // The last untouched, cached block: far from the code tests run early.
        let first = (s + block - 1) & !(block - 1);
        let start = (first..e.saturating_sub(block))
            .step_by(block)
            .rev()
            .find(|&b| !present(b, n).contains(&true) && !cached(b, n).contains(&false))
            .expect("an untouched 64 KiB block of the test binary's code");
        assert!(split(start, start + block));
        let probe = start + 5 * page();
        // SAFETY: a read of one byte of this process's own mapped, readable code.
        let _ = unsafe { std::ptr::read_volatile(probe as *const u8) };
        let now = present(start, n);
        assert!(now[5], "the page read is mapped");
        let mapped = now.iter().filter(|&&p| p).count();
        assert!(
            mapped < n / 2,
            "{mapped} of {n} pages mapped by one read: {now:?}"
        );
    }
}

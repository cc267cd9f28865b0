//! Giving back the pages of gpumon's own code and constants that only starting ran.
//!
//! A file page a process has touched stays in its resident set for the life of the process,
//! and starting touches much code that never runs again: the command line parser, the
//! configuration, the tokio runtimes' building, and nvml-wrapper's 108 kB function that
//! looks up every NVML symbol. On the H200 gpumon's own file was 1.7 MB of a watch's
//! resident set (issue 21), and what the loop runs afterwards is a part of it. Once the
//! first frame is drawn, the read-only segments of gpumon's own executable are advised
//! `MADV_DONTNEED`: the kernel unmaps those pages from this process only (they stay in the
//! page cache), and the pages the loop still runs fault back in from the unchanged file.
//!
//! Only segments that are never written are given back: a writable segment, or the part
//! made read-only after relocation (`PT_GNU_RELRO`), holds this process's own contents, which
//! `MADV_DONTNEED` would throw away. Other libraries are left alone: their pages are theirs
//! (libnvidia-ml's and the CUDA driver's are most of a monitor's resident set, and the bare
//! NVML poller gpumon is measured against keeps them too).

/// Bytes of gpumon's own read-only segments advised away (0 where that cannot be done).
pub(super) fn give_back() -> usize {
    let mut ranges = Vec::new();
    own_readonly_ranges(&mut ranges);
    let mut bytes = 0;
    for (start, end) in ranges {
        // SAFETY: the range lies inside segments of this executable that are mapped read-only
        // from its file and never written, so dropping their pages loses nothing: a later
        // access reads the same bytes from the file again.
        if unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) }
            == 0
        {
            bytes += end - start;
        }
    }
    bytes
}

/// The page-aligned ranges of the executable's read-only `PT_LOAD` segments, less any
/// `PT_GNU_RELRO` part, for the object that holds this very function.
fn own_readonly_ranges(out: &mut Vec<(usize, usize)>) {
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
        let ours = phdrs.iter().any(|p| {
            let (s, e) = span(p);
            p.p_type == libc::PT_LOAD && (s..e).contains(&search.marker)
        });
        if !ours {
            return 0;
        }
        let relro: Vec<(usize, usize)> = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_GNU_RELRO)
            .map(span)
            .collect();
        for p in phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_W == 0)
        {
            let (s, e) = span(p);
            let (s, e) = (page_up(s), page_down(e));
            if s < e && !relro.iter().any(|&(rs, re)| rs < e && s < re) {
                search.out.push((s, e));
            }
        }
        1
    }
    let mut search = Search {
        marker: own_readonly_ranges as *const () as usize,
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

fn page_up(a: usize) -> usize {
    let p = page();
    (a + p - 1) & !(p - 1)
}

fn page_down(a: usize) -> usize {
    a & !(page() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident_kb_of_own_file() -> usize {
        let exe = std::fs::read_link("/proc/self/exe").expect("exe");
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut ours = false;
        let mut kb = 0;
        for line in smaps.lines() {
            let mut parts = line.split_whitespace();
            let first = parts.next().unwrap_or("");
            if first.contains('-') && line.split_whitespace().count() >= 5 {
                ours = line.split_whitespace().nth(5).map(std::path::Path::new) == Some(&exe);
            } else if ours && first == "Rss:" {
                kb += parts
                    .next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
            }
        }
        kb
    }

    #[test]
    fn the_readonly_segments_are_found_page_aligned_and_outside_relro() {
        let mut r = Vec::new();
        own_readonly_ranges(&mut r);
        assert!(!r.is_empty(), "the test binary has read-only segments");
        let marker = own_readonly_ranges as *const () as usize;
        assert!(
            r.iter().any(|&(s, e)| (s..e).contains(&marker)),
            "the code segment, which holds this function, is among them: {r:x?}"
        );
        for &(s, e) in &r {
            assert!(s < e && s % page() == 0 && e % page() == 0, "{s:x}-{e:x}");
        }
    }

    #[test]
    fn giving_back_lowers_the_resident_set_and_the_code_still_runs() {
        // Touch the code and constants of this binary, then give them back.
        let before = resident_kb_of_own_file();
        let bytes = give_back();
        let after = resident_kb_of_own_file();
        assert!(bytes > 0);
        assert!(
            after < before,
            "resident {before} kB before, {after} kB after"
        );
        // Code and constants fault back in unchanged: formatting, a table lookup, a panic
        // caught (the unwinder reads the binary's own read-only tables).
        assert_eq!(format!("{:>6.2}", 3.14159_f64), "  3.14");
        let caught = std::panic::catch_unwind(|| panic!("after giving back"));
        assert!(caught.is_err());
    }
}

//! The vDSO clock entries, and the stubs that send them to the kernel.
//!
//! Reading the clock through the vDSO costs ~20 ns and never reaches the tracer; as a seccomp
//! notification it costs two context switches (~5–20 µs), and CPython alone reads the clock
//! thousands of times at start-up. So processes keep the vDSO until the virtual clock first
//! departs from real time (a skipped sleep, a date offset, a process spinning on the clock);
//! then every live process's `clock_gettime`, `gettimeofday` and `time` entries are overwritten
//! with `mov eax, NR; syscall; ret`, so later reads become syscalls the tracer answers. Until
//! then the virtual clock *is* the real clock, so the reads it did not see were right.
//!
//! Everything here is pure: ELF parsing of a vDSO image, the patch plan, and the checks the
//! tracer makes before writing (tracer/lazyclock.rs does the writing).

use std::ops::Range;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VdsoError {
    #[error("not a little-endian ELF64 image")]
    NotElf,
    #[error("ELF structure out of bounds ({0})")]
    Bounds(&'static str),
    #[error("no dynamic symbol table")]
    NoDynsym,
    #[error("no clock_gettime entry")]
    NoClockGettime,
    #[error("the entry of {0} is too short to hold a stub")]
    TooShort(&'static str),
    #[error("the memory map shows more than one [vdso]")]
    Ambiguous,
}

/// `endbr64`: kept in place when an entry starts with it (indirect-branch tracking).
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
pub const STUB_LEN: usize = 8;

/// One entry to overwrite: `off` is relative to the start of the vDSO mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patch {
    pub name: &'static str,
    pub off: u64,
    pub stub: [u8; STUB_LEN],
}

/// `mov eax, nr; syscall; ret`: the registers already hold the C arguments the syscall takes.
pub fn stub(nr: u32) -> [u8; STUB_LEN] {
    let n = nr.to_le_bytes();
    [0xb8, n[0], n[1], n[2], n[3], 0x0f, 0x05, 0xc3]
}

/// The `N` bytes at `off`, bounds- and overflow-checked.
fn bytes_at<const N: usize>(b: &[u8], off: usize) -> Result<[u8; N], VdsoError> {
    off.checked_add(N)
        .and_then(|end| b.get(off..end))
        .and_then(|s| s.try_into().ok())
        .ok_or(VdsoError::Bounds("field"))
}

fn u16_at(b: &[u8], off: usize) -> Result<u16, VdsoError> {
    bytes_at(b, off).map(u16::from_le_bytes)
}

fn u32_at(b: &[u8], off: usize) -> Result<u32, VdsoError> {
    bytes_at(b, off).map(u32::from_le_bytes)
}

fn u64_at(b: &[u8], off: usize) -> Result<u64, VdsoError> {
    bytes_at(b, off).map(u64::from_le_bytes)
}

fn usize_at(b: &[u8], off: usize) -> Result<usize, VdsoError> {
    usize::try_from(u64_at(b, off)?).map_err(|_| VdsoError::Bounds("offset"))
}

/// A dynamic symbol: value (virtual address) and size.
struct Sym {
    value: u64,
    size: u64,
}

/// The dynamic symbols of an ELF64 image, by name (section headers: the kernel keeps them in
/// the vDSO image).
fn dynsyms(img: &[u8]) -> Result<Vec<(String, Sym)>, VdsoError> {
    if img.get(0..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return Err(VdsoError::NotElf);
    }
    let shoff = usize_at(img, 0x28)?;
    let shentsize = u16_at(img, 0x3a)? as usize;
    let shnum = u16_at(img, 0x3c)? as usize;
    if shentsize < 64 {
        return Err(VdsoError::Bounds("section header size"));
    }
    let sh = |i: usize| -> Result<usize, VdsoError> {
        i.checked_mul(shentsize)
            .and_then(|o| o.checked_add(shoff))
            .filter(|o| o.checked_add(64).is_some_and(|e| e <= img.len()))
            .ok_or(VdsoError::Bounds("section header"))
    };
    const SHT_DYNSYM: u32 = 11;
    let mut dynsym = None;
    for i in 0..shnum {
        let h = sh(i)?;
        if u32_at(img, h + 4)? == SHT_DYNSYM {
            dynsym = Some(h);
            break;
        }
    }
    let h = dynsym.ok_or(VdsoError::NoDynsym)?;
    let (off, size, entsize) = (
        usize_at(img, h + 24)?,
        usize_at(img, h + 32)?,
        usize_at(img, h + 56)?,
    );
    let strh = sh(u32_at(img, h + 40)? as usize)?;
    let (stroff, strsize) = (usize_at(img, strh + 24)?, usize_at(img, strh + 32)?);
    let strtab = img
        .get(stroff..stroff.saturating_add(strsize))
        .ok_or(VdsoError::Bounds("string table"))?;
    if entsize < 24 {
        return Err(VdsoError::Bounds("symbol size"));
    }
    let table = img
        .get(off..off.saturating_add(size))
        .ok_or(VdsoError::Bounds("symbol table"))?;
    let mut out = Vec::new();
    for s in table.chunks_exact(entsize) {
        let name_off = u32_at(s, 0)? as usize;
        let name = strtab
            .get(name_off..)
            .and_then(|t| t.split(|&b| b == 0).next())
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        out.push((
            name,
            Sym {
                value: u64_at(s, 8)?,
                size: u64_at(s, 16)?,
            },
        ));
    }
    Ok(out)
}

/// The load bias: a symbol's offset in the mapping is `value - bias` (the first `PT_LOAD`).
fn load_bias(img: &[u8]) -> Result<u64, VdsoError> {
    let phoff = usize_at(img, 0x20)?;
    let phentsize = u16_at(img, 0x36)? as usize;
    let phnum = u16_at(img, 0x38)? as usize;
    for i in 0..phnum {
        let p = i
            .checked_mul(phentsize)
            .and_then(|o| o.checked_add(phoff))
            .ok_or(VdsoError::Bounds("program header"))?;
        if u32_at(img, p)? == 1 {
            let vaddr = u64_at(img, p.checked_add(16).ok_or(VdsoError::Bounds("phdr"))?)?;
            let offset = u64_at(img, p.checked_add(8).ok_or(VdsoError::Bounds("phdr"))?)?;
            return Ok(vaddr.wrapping_sub(offset));
        }
    }
    Err(VdsoError::Bounds("no PT_LOAD"))
}

/// The clock entries of a vDSO image and their stubs (x86_64 syscall numbers).
pub fn plan(img: &[u8]) -> Result<Vec<Patch>, VdsoError> {
    let syms = dynsyms(img)?;
    let bias = load_bias(img)?;
    let find = |names: [&str; 2]| {
        names
            .iter()
            .find_map(|n| syms.iter().find(|(s, v)| s == n && v.value != 0))
            .map(|(_, v)| v)
    };
    let wanted: [(&'static str, [&str; 2], u32, bool); 3] = [
        (
            "clock_gettime",
            ["__vdso_clock_gettime", "clock_gettime"],
            228,
            true,
        ),
        (
            "gettimeofday",
            ["__vdso_gettimeofday", "gettimeofday"],
            96,
            false,
        ),
        ("time", ["__vdso_time", "time"], 201, false),
    ];
    let mut out: Vec<Patch> = Vec::new();
    for (name, names, nr, required) in wanted {
        let Some(sym) = find(names) else {
            if required {
                return Err(VdsoError::NoClockGettime);
            }
            continue;
        };
        let entry = sym.value.wrapping_sub(bias);
        let e = usize::try_from(entry).map_err(|_| VdsoError::Bounds("entry"))?;
        let skip = if img.get(e..e.saturating_add(4)) == Some(&ENDBR64[..]) {
            4
        } else {
            0
        };
        let end = e
            .checked_add(skip + STUB_LEN)
            .ok_or(VdsoError::Bounds("entry"))?;
        if end > img.len() {
            return Err(VdsoError::Bounds("entry"));
        }
        if sym.size != 0 && sym.size < (skip + STUB_LEN) as u64 {
            return Err(VdsoError::TooShort(name));
        }
        let off = entry + skip as u64;
        if out.iter().any(|p| p.off == off) {
            continue;
        }
        out.push(Patch {
            name,
            off,
            stub: stub(nr),
        });
    }
    Ok(out)
}

/// What an image holds at the planned entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The kernel's code (as in `original`).
    Original,
    /// Our stubs.
    Patched,
    /// Neither: the process rewrote its vDSO, or a different image is mapped there.
    Foreign,
}

pub fn state(img: &[u8], original: &[u8], plan: &[Patch]) -> State {
    let at = |b: &[u8], p: &Patch| {
        let o = p.off as usize;
        b.get(o..o + STUB_LEN).map(|s| s.to_vec())
    };
    if plan
        .iter()
        .all(|p| at(img, p).as_deref() == Some(&p.stub[..]))
    {
        State::Patched
    } else if plan
        .iter()
        .all(|p| at(img, p).is_some() && at(img, p) == at(original, p))
    {
        State::Original
    } else {
        State::Foreign
    }
}

/// Addresses a stopped thread must not be resumed at once the stubs are written: inside the
/// first `STUB_LEN` bytes of an entry, past its first byte (it would run half an old instruction
/// followed by the stub's bytes). A thread exactly at an entry runs the stub.
pub fn windows(base: u64, plan: &[Patch]) -> Vec<Range<u64>> {
    plan.iter()
        .map(|p| {
            let s = base.wrapping_add(p.off);
            s + 1..s + STUB_LEN as u64
        })
        .collect()
}

pub fn in_window(rip: u64, windows: &[Range<u64>]) -> bool {
    windows.iter().any(|w| w.contains(&rip))
}

/// The address range, inode and pathname of one `/proc/<pid>/maps` line (the pathname may hold
/// spaces; the five fields before it never do).
fn maps_fields(line: &str) -> Option<(&str, &str, &str)> {
    let mut rest = line;
    let mut fields = [""; 5];
    for f in fields.iter_mut() {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        *f = &rest[..end];
        rest = &rest[end..];
    }
    Some((fields[0], fields[4], rest.trim()))
}

/// The kernel's `[vdso]` mapping in a `/proc/<pid>/maps` text: the line whose pathname is
/// exactly `[vdso]` with inode 0 (a file the program names `x [vdso]` shows its absolute path,
/// a named anonymous mapping shows `[anon:…]`). More than one such line is refused.
pub fn vdso_range(maps: &str) -> Result<Option<Range<u64>>, VdsoError> {
    let mut found = None;
    for line in maps.lines() {
        let Some((range, inode, path)) = maps_fields(line) else {
            continue;
        };
        if path != "[vdso]" || inode != "0" {
            continue;
        }
        let r = range.split_once('-').and_then(|(lo, hi)| {
            let lo = u64::from_str_radix(lo, 16).ok()?;
            let hi = u64::from_str_radix(hi, 16).ok()?;
            (lo < hi && hi - lo <= 1 << 20).then_some(lo..hi)
        });
        let Some(r) = r else {
            return Err(VdsoError::Ambiguous);
        };
        if found.replace(r).is_some() {
            return Err(VdsoError::Ambiguous);
        }
    }
    Ok(found)
}

/// The user-mode instruction pointer a thread will resume at, from `/proc/<tid>/syscall`
/// (`nr args… sp pc` when blocked in a call, `-1 sp pc` when stopped elsewhere); `None` when
/// it is `running` (on a CPU in the kernel) or unreadable.
pub fn saved_pc(text: &str) -> Option<u64> {
    let f: Vec<&str> = text.split_whitespace().collect();
    if f.len() < 3 {
        return None;
    }
    f.first()?.parse::<i64>().ok()?;
    u64::from_str_radix(f.last()?.trim_start_matches("0x"), 16).ok()
}

/// The state letter of a `/proc/<pid>/stat` text (`R`, `S`, `Z`, …).
pub fn stat_state(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// User plus system CPU time, in clock ticks, from a `/proc/<pid>/stat` text.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own vDSO (the same image every process on this kernel gets).
    fn own_vdso() -> Vec<u8> {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let r = vdso_range(&maps)
            .expect("one [vdso]")
            .expect("a [vdso] mapping");
        let f = std::fs::File::open("/proc/self/mem").expect("mem");
        let mut img = vec![0u8; (r.end - r.start) as usize];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut img, r.start).expect("read vdso");
        img
    }

    #[test]
    fn the_running_kernels_vdso_has_a_plan() {
        let img = own_vdso();
        let p = plan(&img).expect("plan");
        assert!(p.iter().any(|x| x.name == "clock_gettime"), "{p:?}");
        assert_eq!(state(&img, &img, &p), State::Original);
        let mut patched = img.clone();
        for x in &p {
            patched[x.off as usize..x.off as usize + STUB_LEN].copy_from_slice(&x.stub);
        }
        assert_eq!(state(&patched, &img, &p), State::Patched);
        // One stub written, the rest not: neither (a half-patched image is not trusted).
        let mut half = img.clone();
        half[p[0].off as usize] ^= 0xff;
        assert_eq!(state(&half, &img, &p), State::Foreign);
    }

    #[test]
    fn the_stub_is_the_syscall_the_entry_stands_for() {
        assert_eq!(stub(228), [0xb8, 228, 0, 0, 0, 0x0f, 0x05, 0xc3]);
        assert_eq!(stub(201)[1], 201);
    }

    #[test]
    fn garbage_images_are_refused_not_panicked_on() {
        assert_eq!(plan(&[]), Err(VdsoError::NotElf));
        assert_eq!(plan(b"not an elf at all"), Err(VdsoError::NotElf));
        let img = own_vdso();
        for cut in [8, 64, 200, img.len() / 2, img.len() - 1] {
            let _ = plan(&img[..cut]);
        }
        // Section header table pointing past the end.
        let mut bad = img.clone();
        bad[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(plan(&bad).is_err());
        let mut bad = img;
        bad[0x3a..0x3c].copy_from_slice(&0u16.to_le_bytes());
        assert!(plan(&bad).is_err());
    }

    #[test]
    fn windows_exclude_the_entry_itself() {
        let p = [Patch {
            name: "clock_gettime",
            off: 0x100,
            stub: stub(228),
        }];
        let w = windows(0x7000_0000, &p);
        assert!(!in_window(0x7000_0100, &w));
        assert!(in_window(0x7000_0101, &w));
        assert!(in_window(0x7000_0107, &w));
        assert!(!in_window(0x7000_0108, &w));
    }

    #[test]
    fn maps_syscall_and_stat_texts_parse() {
        let maps = "55d0-55d1 r--p 00000000 00:1f 12 /usr/bin/python3\n\
                    7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]\n";
        assert_eq!(vdso_range(maps), Ok(Some(0x7ffd1000..0x7ffd3000)));
        assert_eq!(
            vdso_range("7ffd1000-7ffd3000 r--p 0 0:0 0 [vvar]\n"),
            Ok(None)
        );
        // Decoys: a file whose name ends in "[vdso]" (listed first, at a lower address), a
        // named anonymous mapping, a file with inode != 0.
        let decoy = "1000-3000 r-xp 00000000 00:1f 99  /tmp/x [vdso]\n\
                     4000-6000 r-xp 00000000 00:00 0  [anon:[vdso]]\n\
                     7000-9000 r-xp 00000000 00:1f 12  [vdso]\n";
        assert_eq!(
            vdso_range(&format!("{decoy}{maps}")),
            Ok(Some(0x7ffd1000..0x7ffd3000))
        );
        assert_eq!(vdso_range(decoy), Ok(None));
        assert_eq!(
            vdso_range(&format!("{maps}{maps}")),
            Err(VdsoError::Ambiguous)
        );
        assert_eq!(
            saved_pc("230 0x1 0x0 0x7ffc 0x0 0x0 0x0 0x7ffc 0x7f12"),
            Some(0x7f12)
        );
        assert_eq!(saved_pc("-1 0x7ffc 0x7f12"), Some(0x7f12));
        assert_eq!(saved_pc("running"), None);
        assert_eq!(saved_pc(""), None);
        assert_eq!(stat_state("42 (a) b) Z 1 2"), Some('Z'));
        let stat = "42 (a (b) c) R 1 42 42 0 -1 4194304 100 0 0 0 250 30 0 0 20 0 1 0";
        assert_eq!(cpu_ticks(stat), Some(280));
        assert_eq!(cpu_ticks("42 (x) R 1"), None);
    }
}

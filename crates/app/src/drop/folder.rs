//! A folder of documents, dropped or picked: the files inside it that Hearth reads, found
//! recursively within bounds, and what was skipped and why.
//!
//! The contract: [`walk`] looks at no more than [`FolderLimits::max_entries`] entries, goes no
//! deeper than [`FolderLimits::max_depth`] folders, keeps no more than
//! [`FolderLimits::max_files`] files of at most [`FolderLimits::max_total_bytes`] together, and
//! never follows a link out of the folder (a link to a folder inside it that was seen already is
//! skipped, so a link loop ends). Whatever it leaves is counted by why ([`Skip`]) or, when a
//! bound stopped it, named in [`FolderReport::cuts`]. It reads only folder listings and file
//! sizes, never a file's content: that is indexing's, which then says why a file it was given
//! cannot be read.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::documents::file_name;

/// How much of a folder is taken. `Default` gives the bounds a drop uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderLimits {
    /// The most files attached from one folder. By default 2,000.
    pub max_files: usize,
    /// The deepest folder looked into (the dropped folder is depth 0). By default 16.
    pub max_depth: usize,
    /// The most bytes of files attached from one folder, together. By default 4 GiB.
    pub max_total_bytes: u64,
    /// The largest file attached (the extractor's own limit). By default 256 MiB.
    pub max_file_bytes: u64,
    /// The most folder entries looked at (files, folders, links, whatever they are). By
    /// default 20,000: a folder of 100,000 files is cut there, in well under a second.
    pub max_entries: usize,
}

impl Default for FolderLimits {
    fn default() -> Self {
        Self {
            max_files: 2_000,
            max_depth: 16,
            max_total_bytes: 4 << 30,
            max_file_bytes: hearth_documents::ExtractLimits::default().max_file_bytes,
            max_entries: 20_000,
        }
    }
}

/// Why a file or folder inside a dropped folder is not attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Skip {
    /// Not a kind of file Hearth reads (by its name).
    NotDocument,
    /// Larger than the most Hearth reads from one file.
    TooLarge,
    /// Hidden (its name starts with a dot), as a file manager hides it.
    Hidden,
    /// A link to somewhere outside the folder: not followed.
    LinkOutside,
    /// A link to a folder or file already taken (a link loop, or the same file twice).
    Repeated,
    /// Could not be listed or looked at (no permission, or gone meanwhile).
    Unreadable,
    /// Neither a file nor a folder (a pipe, a device, a socket).
    NotAFile,
}

/// A bound that stopped the walk before the whole folder was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum CutWhy {
    /// [`FolderLimits::max_files`] files were taken; the rest are not.
    Files,
    /// Folders deeper than [`FolderLimits::max_depth`] were not looked into.
    Depth,
    /// [`FolderLimits::max_total_bytes`] were taken; the rest are not.
    Bytes,
    /// [`FolderLimits::max_entries`] entries were looked at; the rest are not.
    Entries,
}

/// A bound that stopped the walk, with its value (files, folders, bytes or entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FolderCut {
    pub why: CutWhy,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub limit: u64,
}

/// How many files of a folder were skipped for one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct SkipCount {
    pub why: Skip,
    pub count: usize,
}

/// What was taken of one folder, as the front end says it: "Tax papers: 12 files attached;
/// 3 skipped: 2 are not documents Hearth reads, 1 is too large".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FolderReport {
    /// The folder's name, without its parent.
    pub name: String,
    /// Files taken to attach.
    pub files: usize,
    /// The files and folders left, counted by why (each reason once, in [`Skip`]'s order).
    pub skipped: Vec<SkipCount>,
    /// The bounds that stopped the walk early (none: the whole folder was seen).
    pub cuts: Vec<FolderCut>,
}

/// Whether a file is one to attach, by its name: a kind Hearth reads (pictures too: they are
/// read through OCR where it is installed, and refused plainly where not).
pub(crate) fn is_document(path: &Path) -> bool {
    hearth_documents::Format::from_path(path).is_some()
        || super::has_extension(path, super::PICTURE_EXTENSIONS)
}

/// The files of the folder `root` to attach (in name order within each folder, folders after
/// the files beside them), and what was taken and left.
pub fn walk(root: &Path, limits: &FolderLimits) -> (Vec<PathBuf>, FolderReport) {
    let mut walk = Walk {
        limits,
        files: Vec::new(),
        bytes: 0,
        entries: 0,
        skipped: BTreeMap::new(),
        cuts: Vec::new(),
        seen: HashSet::new(),
        inside: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
    };
    walk.seen.insert(walk.inside.clone());
    walk.folder(root, 0);
    let report = FolderReport {
        name: file_name(root),
        files: walk.files.len(),
        skipped: walk
            .skipped
            .iter()
            .map(|(&why, &count)| SkipCount { why, count })
            .collect(),
        cuts: walk.cuts,
    };
    (walk.files, report)
}

struct Walk<'a> {
    limits: &'a FolderLimits,
    files: Vec<PathBuf>,
    bytes: u64,
    entries: usize,
    skipped: BTreeMap<Skip, usize>,
    cuts: Vec<FolderCut>,
    /// Folders and files taken, by their real path, so a link to one is not taken twice.
    seen: HashSet<PathBuf>,
    /// The dropped folder's real path: a link may lead anywhere inside it, nowhere else.
    inside: PathBuf,
}

/// What one folder entry is, after its link (if it is one) is resolved within the folder.
enum Entry {
    File(u64),
    Folder,
    Left(Skip),
}

impl Walk<'_> {
    /// Whether a bound has stopped the walk (the depth bound only stops a branch).
    fn stopped(&self) -> bool {
        self.cuts.iter().any(|c| c.why != CutWhy::Depth)
    }

    /// Whether no more files may be taken.
    fn full(&self) -> bool {
        self.cuts
            .iter()
            .any(|c| matches!(c.why, CutWhy::Files | CutWhy::Bytes))
    }

    fn cut(&mut self, why: CutWhy, limit: u64) {
        if !self.cuts.iter().any(|c| c.why == why) {
            self.cuts.push(FolderCut { why, limit });
        }
    }

    fn skip(&mut self, why: Skip) {
        *self.skipped.entry(why).or_default() += 1;
    }

    /// Takes the files of `dir` (at `depth`), then walks its folders.
    fn folder(&mut self, dir: &Path, depth: usize) {
        let Ok(listing) = std::fs::read_dir(dir) else {
            self.skip(Skip::Unreadable);
            return;
        };
        // At most the entries still allowed (and one more, to know there were more): a folder
        // of a million files costs no more than the bound.
        let budget = self.limits.max_entries - self.entries;
        let mut names: Vec<PathBuf> = Vec::new();
        for entry in listing.take(budget + 1) {
            match entry {
                Ok(entry) => names.push(entry.path()),
                Err(_) => self.skip(Skip::Unreadable),
            }
        }
        if names.len() > budget {
            names.truncate(budget);
            self.cut(CutWhy::Entries, self.limits.max_entries as u64);
        }
        self.entries += names.len();
        names.sort();
        let mut folders = Vec::new();
        for path in names {
            if self.full() {
                return;
            }
            let hidden = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if hidden {
                self.skip(Skip::Hidden);
                continue;
            }
            match self.entry(&path) {
                Entry::Left(why) => self.skip(why),
                Entry::Folder => folders.push(path),
                Entry::File(size) => self.file(path, size),
            }
        }
        for sub in folders {
            if self.stopped() {
                return;
            }
            if depth + 1 > self.limits.max_depth {
                self.cut(CutWhy::Depth, self.limits.max_depth as u64);
                continue;
            }
            self.folder(&sub, depth + 1);
        }
    }

    /// What `path` is, without following a link out of the folder or into one already seen.
    fn entry(&mut self, path: &Path) -> Entry {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return Entry::Left(Skip::Unreadable);
        };
        let meta = if meta.file_type().is_symlink() {
            let Ok(real) = std::fs::canonicalize(path) else {
                // A dangling link, or one in a loop the system itself refuses to resolve.
                return Entry::Left(Skip::Unreadable);
            };
            if !real.starts_with(&self.inside) {
                return Entry::Left(Skip::LinkOutside);
            }
            let Ok(meta) = std::fs::metadata(&real) else {
                return Entry::Left(Skip::Unreadable);
            };
            meta
        } else {
            meta
        };
        if meta.is_dir() {
            // A folder is looked into once, however many links lead to it.
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if !self.seen.insert(real) {
                return Entry::Left(Skip::Repeated);
            }
            return Entry::Folder;
        }
        if !meta.is_file() {
            return Entry::Left(Skip::NotAFile);
        }
        if !is_document(path) {
            return Entry::Left(Skip::NotDocument);
        }
        if meta.len() > self.limits.max_file_bytes {
            return Entry::Left(Skip::TooLarge);
        }
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if !self.seen.insert(real) {
            return Entry::Left(Skip::Repeated);
        }
        Entry::File(meta.len())
    }

    fn file(&mut self, path: PathBuf, size: u64) {
        if self.files.len() >= self.limits.max_files {
            self.cut(CutWhy::Files, self.limits.max_files as u64);
            return;
        }
        if self.bytes + size > self.limits.max_total_bytes {
            self.cut(CutWhy::Bytes, self.limits.max_total_bytes);
            return;
        }
        self.bytes += size;
        self.files.push(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"some words").unwrap();
        }
        dir
    }

    fn names(root: &Path, files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| f.strip_prefix(root).unwrap().to_string_lossy().into_owned())
            .collect()
    }

    fn skipped(report: &FolderReport, why: Skip) -> usize {
        report
            .skipped
            .iter()
            .find(|s| s.why == why)
            .map_or(0, |s| s.count)
    }

    #[test]
    fn a_folder_gives_its_documents_recursively_and_counts_the_rest() {
        let dir = tree(&[
            "Tax papers/2024/receipt.pdf",
            "Tax papers/letter.docx",
            "Tax papers/notes.md",
            "Tax papers/scan.png",
            "Tax papers/setup.exe",
            "Tax papers/.DS_Store",
            "Tax papers/2024/song.mp3",
        ]);
        let root = dir.path().join("Tax papers");
        let (files, report) = walk(&root, &FolderLimits::default());
        assert_eq!(
            names(&root, &files),
            ["letter.docx", "notes.md", "scan.png", "2024/receipt.pdf"],
            "files beside each other by name, then the folders'; a picture is read by OCR"
        );
        assert_eq!(report.name, "Tax papers");
        assert_eq!(report.files, 4);
        assert_eq!(skipped(&report, Skip::NotDocument), 2);
        assert_eq!(skipped(&report, Skip::Hidden), 1);
        assert!(report.cuts.is_empty(), "the whole folder was seen");
    }

    #[test]
    fn a_file_over_the_size_limit_is_skipped_as_too_large() {
        let dir = tree(&["f/small.txt"]);
        std::fs::write(dir.path().join("f/big.txt"), vec![b'a'; 2048]).unwrap();
        let limits = FolderLimits {
            max_file_bytes: 1024,
            ..FolderLimits::default()
        };
        let (files, report) = walk(&dir.path().join("f"), &limits);
        assert_eq!(files.len(), 1);
        assert_eq!(skipped(&report, Skip::TooLarge), 1);
    }

    #[test]
    fn the_count_depth_and_bytes_bounds_cut_and_say_so() {
        let dir = tree(&["f/a.txt", "f/b.txt", "f/c.txt"]);
        let root = dir.path().join("f");
        let (files, report) = walk(
            &root,
            &FolderLimits {
                max_files: 2,
                ..FolderLimits::default()
            },
        );
        assert_eq!(names(&root, &files), ["a.txt", "b.txt"]);
        assert_eq!(
            report.cuts,
            [FolderCut {
                why: CutWhy::Files,
                limit: 2
            }]
        );
        let (files, report) = walk(
            &root,
            &FolderLimits {
                max_total_bytes: 15,
                ..FolderLimits::default()
            },
        );
        assert_eq!(files.len(), 1, "10 bytes each, 15 together");
        assert_eq!(report.cuts[0].why, CutWhy::Bytes);

        let deep = tree(&["d/1/2/3/deep.txt", "d/top.txt"]);
        let (files, report) = walk(
            &deep.path().join("d"),
            &FolderLimits {
                max_depth: 2,
                ..FolderLimits::default()
            },
        );
        assert_eq!(names(&deep.path().join("d"), &files), ["top.txt"]);
        assert_eq!(
            report.cuts,
            [FolderCut {
                why: CutWhy::Depth,
                limit: 2
            }]
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_are_not_followed_out_of_the_folder_and_a_link_loop_ends() {
        use std::os::unix::fs::symlink;
        let dir = tree(&["f/a.txt", "f/sub/b.txt", "outside/secret.txt"]);
        let root = dir.path().join("f");
        symlink(&root, root.join("sub/loop")).unwrap();
        symlink(dir.path().join("outside"), root.join("away")).unwrap();
        symlink(root.join("a.txt"), root.join("again.txt")).unwrap();
        symlink(root.join("sub/b.txt"), root.join("inside-link.md")).unwrap();
        symlink(root.join("nowhere"), root.join("dangling.txt")).unwrap();
        let (files, report) = walk(&root, &FolderLimits::default());
        let names = names(&root, &files);
        assert_eq!(
            names,
            ["a.txt", "inside-link.md"],
            "each file once, by the first name met"
        );
        assert_eq!(skipped(&report, Skip::LinkOutside), 1);
        assert_eq!(
            skipped(&report, Skip::Repeated),
            3,
            "the loop, a link to a file taken, and the file a link took"
        );
        assert_eq!(skipped(&report, Skip::Unreadable), 1, "the dangling link");
        assert!(report.cuts.is_empty());
    }

    #[test]
    fn a_folder_of_100_000_files_is_cut_at_the_entries_bound() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("many");
        std::fs::create_dir(&root).unwrap();
        for i in 0..100_000 {
            // Empty files: cheap to make; most are not documents, a few are.
            let name = if i % 1000 == 0 {
                format!("n{i}.txt")
            } else {
                format!("n{i}.bin")
            };
            std::fs::File::create(root.join(name)).unwrap();
        }
        let (files, report) = walk(&root, &FolderLimits::default());
        assert_eq!(
            report.cuts,
            [FolderCut {
                why: CutWhy::Entries,
                limit: 20_000
            }]
        );
        let looked: usize = report.files + report.skipped.iter().map(|s| s.count).sum::<usize>();
        assert_eq!(
            looked, 20_000,
            "no more entries than the bound are looked at"
        );
        assert_eq!(files.len(), report.files);
        assert!(files.len() <= 100, "{} documents", files.len());
    }
}

//! Template expansion and document generation for one file description.

use crate::documents;
use crate::materialize::ImageError;
use crate::spec::{FileKind, FileSpec};
use crate::template::{expand, Vars};
use planted_creds::Gen;

pub(crate) fn tpl(what: &str, text: &str, vars: &Vars) -> Result<String, ImageError> {
    expand(text, vars).map_err(|err| ImageError::Template {
        what: what.to_string(),
        err,
    })
}

/// Render one file description (text or generated document) with the run's variables.
pub(crate) fn render(
    f: &FileSpec,
    vars: &Vars,
    g: &mut Gen,
    now: i64,
    mtime: i64,
    path: &str,
) -> Result<Vec<u8>, ImageError> {
    let doc = |err| ImageError::Document {
        path: path.to_string(),
        err,
    };
    let lines = f
        .lines
        .iter()
        .map(|l| tpl(path, l, vars))
        .collect::<Result<Vec<_>, _>>()?;
    let author = vars.get("full_name").cloned().unwrap_or_default();
    Ok(match f.kind {
        FileKind::Text => tpl(path, f.text.as_deref().unwrap_or(""), vars)?.into_bytes(),
        FileKind::Docx => documents::docx(&lines, &author, mtime).map_err(doc)?,
        FileKind::Xlsx => {
            let rows = f
                .rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|c| tpl(path, c, vars))
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()?;
            documents::xlsx(&rows, &author, mtime).map_err(doc)?
        }
        FileKind::Pdf => documents::pdf(&lines, &author, mtime),
        FileKind::Ics => {
            let uids: Vec<String> = f
                .events
                .iter()
                .map(|_| g.uuid().to_ascii_uppercase())
                .collect();
            let prodid = vars.get("ics_prodid").cloned().unwrap_or_default();
            documents::ics(&f.events, &uids, now, &prodid).into_bytes()
        }
        FileKind::Jpeg => documents::jpeg(f.width.unwrap_or(640), f.height.unwrap_or(480)),
    })
}

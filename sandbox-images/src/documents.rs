//! Small but well-formed user documents: Office Open XML (docx, xlsx), PDF, iCalendar and JPEG.

use crate::spec::EventSpec;
use planted_creds::time::{civil, ical};
use std::io::Write;
use zip::write::SimpleFileOptions;

#[derive(Debug, thiserror::Error)]
pub enum DocError {
    #[error("zip: {0}")]
    Zip(#[from] zip::result::ZipError),
    #[error("zip: {0}")]
    Io(#[from] std::io::Error),
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn zip_parts(parts: &[(&str, String)], mtime: i64) -> Result<Vec<u8>, DocError> {
    let c = civil(mtime);
    let dt = zip::DateTime::from_date_and_time(
        c.year.clamp(1980, 2107) as u16,
        c.month as u8,
        c.day as u8,
        c.hour as u8,
        c.minute as u8,
        c.second as u8,
    )
    .unwrap_or_default();
    let opts = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(dt);
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, body) in parts {
        w.start_file(*name, opts)?;
        w.write_all(body.as_bytes())?;
    }
    Ok(w.finish()?.into_inner())
}

const XML: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n";
const RELS_NS: &str = "http://schemas.openxmlformats.org/package/2006/relationships";
const DOC_REL: &str =
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument";

fn core_props(author: &str, mtime: i64) -> String {
    let t = planted_creds::time::rfc3339(mtime);
    format!(
        "{XML}<cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmlns:dcterms=\"http://purl.org/dc/terms/\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><dc:creator>{a}</dc:creator><cp:lastModifiedBy>{a}</cp:lastModifiedBy><dcterms:created xsi:type=\"dcterms:W3CDTF\">{t}</dcterms:created><dcterms:modified xsi:type=\"dcterms:W3CDTF\">{t}</dcterms:modified></cp:coreProperties>",
        a = xml_escape(author)
    )
}

pub fn docx(paragraphs: &[String], author: &str, mtime: i64) -> Result<Vec<u8>, DocError> {
    let types = format!(
        "{XML}<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/><Default Extension=\"xml\" ContentType=\"application/xml\"/><Override PartName=\"/word/document.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/><Override PartName=\"/docProps/core.xml\" ContentType=\"application/vnd.openxmlformats-package.core-properties+xml\"/></Types>"
    );
    let rels = format!(
        "{XML}<Relationships xmlns=\"{RELS_NS}\"><Relationship Id=\"rId1\" Type=\"{DOC_REL}\" Target=\"word/document.xml\"/><Relationship Id=\"rId2\" Type=\"http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties\" Target=\"docProps/core.xml\"/></Relationships>"
    );
    let body: String = paragraphs
        .iter()
        .map(|p| {
            format!(
                "<w:p><w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>",
                xml_escape(p)
            )
        })
        .collect();
    let doc = format!(
        "{XML}<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>{body}<w:sectPr><w:pgSz w:w=\"11906\" w:h=\"16838\"/></w:sectPr></w:body></w:document>"
    );
    zip_parts(
        &[
            ("[Content_Types].xml", types),
            ("_rels/.rels", rels),
            ("docProps/core.xml", core_props(author, mtime)),
            ("word/document.xml", doc),
        ],
        mtime,
    )
}

fn col_name(mut i: usize) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'A' + (i % 26) as u8);
        if i < 26 {
            break;
        }
        i = i / 26 - 1;
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}

pub fn xlsx(rows: &[Vec<String>], author: &str, mtime: i64) -> Result<Vec<u8>, DocError> {
    let types = format!(
        "{XML}<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/><Default Extension=\"xml\" ContentType=\"application/xml\"/><Override PartName=\"/xl/workbook.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml\"/><Override PartName=\"/xl/worksheets/sheet1.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml\"/><Override PartName=\"/docProps/core.xml\" ContentType=\"application/vnd.openxmlformats-package.core-properties+xml\"/></Types>"
    );
    let rels = format!(
        "{XML}<Relationships xmlns=\"{RELS_NS}\"><Relationship Id=\"rId1\" Type=\"{DOC_REL}\" Target=\"xl/workbook.xml\"/><Relationship Id=\"rId2\" Type=\"http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties\" Target=\"docProps/core.xml\"/></Relationships>"
    );
    let wb = format!(
        "{XML}<workbook xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\"><sheets><sheet name=\"Sheet1\" sheetId=\"1\" r:id=\"rId1\"/></sheets></workbook>"
    );
    let wb_rels = format!(
        "{XML}<Relationships xmlns=\"{RELS_NS}\"><Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet\" Target=\"worksheets/sheet1.xml\"/></Relationships>"
    );
    let mut data = String::new();
    for (r, row) in rows.iter().enumerate() {
        data.push_str(&format!("<row r=\"{}\">", r + 1));
        for (c, cell) in row.iter().enumerate() {
            let refn = format!("{}{}", col_name(c), r + 1);
            if cell.parse::<f64>().is_ok() {
                data.push_str(&format!("<c r=\"{refn}\"><v>{cell}</v></c>"));
            } else {
                data.push_str(&format!(
                    "<c r=\"{refn}\" t=\"inlineStr\"><is><t>{}</t></is></c>",
                    xml_escape(cell)
                ));
            }
        }
        data.push_str("</row>");
    }
    let sheet = format!(
        "{XML}<worksheet xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\"><sheetData>{data}</sheetData></worksheet>"
    );
    zip_parts(
        &[
            ("[Content_Types].xml", types),
            ("_rels/.rels", rels),
            ("docProps/core.xml", core_props(author, mtime)),
            ("xl/workbook.xml", wb),
            ("xl/_rels/workbook.xml.rels", wb_rels),
            ("xl/worksheets/sheet1.xml", sheet),
        ],
        mtime,
    )
}

fn pdf_escape(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .map(|c| match c {
            '(' | ')' | '\\' => format!("\\{c}"),
            c => c.to_string(),
        })
        .collect()
}

/// A one-page PDF 1.4 with Helvetica text and a correct cross-reference table.
pub fn pdf(lines: &[String], author: &str, mtime: i64) -> Vec<u8> {
    let mut content = String::from("BT\n/F1 12 Tf\n72 770 Td\n16 TL\n");
    for l in lines {
        content.push_str(&format!("({}) Tj T*\n", pdf_escape(l)));
    }
    content.push_str("ET\n");
    let c = civil(mtime);
    let date = format!(
        "D:{:04}{:02}{:02}{:02}{:02}{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    );
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_string(),
        format!("<< /Length {} >>\nstream\n{content}endstream", content.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_string(),
        format!("<< /Author ({}) /CreationDate ({date}) /ModDate ({date}) /Producer (macOS Version 15.5 Quartz PDFContext) >>", pdf_escape(author)),
    ];
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// iCalendar with CRLF line ends; event days are relative to `now`.
pub fn ics(events: &[EventSpec], uids: &[String], now: i64, prodid: &str) -> String {
    let day0 = now - now.rem_euclid(86400);
    let mut s =
        format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:{prodid}\r\nCALSCALE:GREGORIAN\r\n");
    for (i, e) in events.iter().enumerate() {
        let start = day0 + i64::from(e.day) * 86400 + i64::from(e.hour) * 3600;
        let end = start + i64::from(e.minutes) * 60;
        let uid = uids.get(i).cloned().unwrap_or_default();
        s.push_str(&format!(
            "BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:{}\r\nDTSTART:{}\r\nDTEND:{}\r\nSUMMARY:{}\r\n",
            ical(now - 86400 * 14),
            ical(start),
            ical(end),
            e.summary
        ));
        if let Some(loc) = &e.location {
            s.push_str(&format!("LOCATION:{loc}\r\n"));
        }
        s.push_str("END:VEVENT\r\n");
    }
    s.push_str("END:VCALENDAR\r\n");
    s
}

/// A baseline JPEG (JFIF) of the given size: one grey level, every block coded as "no change".
pub fn jpeg(width: u16, height: u16) -> Vec<u8> {
    const QT: [u8; 64] = [
        16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69,
        56, 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81,
        104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
    ];
    let mut o = vec![0xff, 0xd8];
    o.extend_from_slice(&[
        0xff, 0xe0, 0, 16, b'J', b'F', b'I', b'F', 0, 1, 1, 0, 0, 72, 0, 72, 0, 0,
    ]);
    o.extend_from_slice(&[0xff, 0xdb, 0, 67, 0]);
    o.extend_from_slice(&QT);
    let [wh, wl] = width.to_be_bytes();
    let [hh, hl] = height.to_be_bytes();
    o.extend_from_slice(&[0xff, 0xc0, 0, 11, 8, hh, hl, wh, wl, 1, 1, 0x11, 0]);
    // One-symbol Huffman tables: DC category 0 and AC end-of-block, each coded as the bit "0".
    for class in [0x00u8, 0x10] {
        o.extend_from_slice(&[0xff, 0xc4, 0, 20, class, 1]);
        o.extend_from_slice(&[0; 15]);
        o.push(0);
    }
    o.extend_from_slice(&[0xff, 0xda, 0, 8, 1, 1, 0, 0, 63, 0]);
    let blocks = usize::from(width.div_ceil(8)) * usize::from(height.div_ceil(8));
    let bits = blocks * 2;
    o.extend(std::iter::repeat_n(0u8, bits / 8));
    if bits % 8 != 0 {
        o.push(0xff >> (bits % 8));
    }
    o.extend_from_slice(&[0xff, 0xd9]);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns() {
        assert_eq!(col_name(0), "A");
        assert_eq!(col_name(25), "Z");
        assert_eq!(col_name(26), "AA");
    }

    #[test]
    fn jpeg_has_markers() {
        let j = jpeg(640, 480);
        assert_eq!(&j[..4], &[0xff, 0xd8, 0xff, 0xe0]);
        assert_eq!(&j[j.len() - 2..], &[0xff, 0xd9]);
        let p = pdf(&["a (b)".into()], "x", 0);
        assert!(p.starts_with(b"%PDF-1.4"));
        let text = String::from_utf8_lossy(&p);
        let xref: usize = text
            .rsplit("startxref\n")
            .next()
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(&p[xref..xref + 4], b"xref");
    }
}

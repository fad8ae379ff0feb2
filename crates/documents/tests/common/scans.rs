//! Real scans made in the test itself: a multi-page text PDF (Helvetica, WinAnsi, so German,
//! French and Spanish letters are real characters of its text layer), drawn by `pdftoppm` into
//! grey pictures, and rebuilt as an image-only PDF (each page one Flate-compressed picture and
//! no text), as a scanner makes them. Also the character error rate OCR is measured by.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// The text of each test page: English (two pages), German, French and Spanish. Lines of a
/// letter or a report, as people scan them.
pub const PAGES: &[(&str, &[&str])] = &[
    (
        "eng",
        &[
            "Tenancy agreement for the flat at 14 Harbour Road",
            "The rent is 850 pounds a month, paid on the first day.",
            "The deposit of 1,200 pounds is held by the letting agent",
            "and returned within ten days after the tenancy ends.",
            "Either party may end the agreement with two months notice.",
            "Pets are allowed with the written consent of the landlord.",
        ],
    ),
    (
        "eng",
        &[
            "Annual report of the village library, year ending March",
            "Visitors rose by 12 percent to 18,450 over the year.",
            "The reading group met every second Thursday evening.",
            "New shelves for children's books were paid for by a grant.",
            "Opening hours on Saturdays will be extended from June.",
        ],
    ),
    (
        "deu",
        &[
            "Mietvertrag für die Wohnung in der Hafenstraße 14",
            "Die Miete beträgt 850 Euro im Monat und ist am Ersten fällig.",
            "Die Kaution von 1.200 Euro wird nach dem Auszug zurückgezahlt.",
            "Haustiere sind nur mit Zustimmung des Vermieters erlaubt.",
        ],
    ),
    (
        "fra",
        &[
            "Contrat de location pour l'appartement du 14 rue du Port",
            "Le loyer est de 850 euros par mois, payé le premier jour.",
            "Le dépôt de garantie sera rendu après l'état des lieux.",
            "Les animaux sont acceptés avec l'accord écrit du propriétaire.",
        ],
    ),
    (
        "spa",
        &[
            "Contrato de alquiler del piso en la calle del Puerto 14",
            "El alquiler es de 850 euros al mes, pagado el primer día.",
            "La fianza se devolverá después de la revisión del piso.",
            "Se permiten mascotas con el acuerdo escrito del dueño.",
        ],
    ),
];

/// A PDF string literal of `text` in WinAnsi (Latin-1 for these letters), octal-escaped.
fn pdf_string(text: &str) -> String {
    let mut out = String::from("(");
    for c in text.chars() {
        let code = u32::from(c);
        assert!(code < 256, "{c} is not in WinAnsi");
        match c {
            '(' | ')' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            _ => out.push_str(&format!("\\{code:03o}")),
        }
    }
    out.push(')');
    out
}

/// A PDF with one page per entry of `pages`, each page its lines in 12-point Helvetica.
pub fn text_pdf(pages: &[&[&str]]) -> Vec<u8> {
    let mut objects: Vec<Vec<u8>> = Vec::new();
    let count = pages.len();
    // 1 catalog, 2 pages, 3 font, then per page: page, content.
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    let kids: Vec<String> = (0..count).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    objects.push(
        format!(
            "<< /Type /Pages /Kids [{}] /Count {count} >>",
            kids.join(" ")
        )
        .into_bytes(),
    );
    objects.push(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    );
    for (index, lines) in pages.iter().enumerate() {
        let mut content = String::from("BT /F1 12 Tf 16 TL 60 760 Td\n");
        for line in *lines {
            content.push_str(&format!("{} Tj T*\n", pdf_string(line)));
        }
        content.push_str("ET");
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
                 /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * index
            )
            .into_bytes(),
        );
        let mut stream = format!("<< /Length {} >>\nstream\n", content.len()).into_bytes();
        stream.extend_from_slice(content.as_bytes());
        stream.extend_from_slice(b"\nendstream");
        objects.push(stream);
    }
    super::pdf_of(&objects)
}

/// A grey picture: its size and one byte per pixel.
pub struct Grey {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

/// Page `page` (from 1) of the PDF at `pdf` drawn by `pdftoppm` at `dpi`, grey.
pub fn rasterize(pdf: &Path, page: u32, dpi: u32, dir: &Path) -> Grey {
    let stem = dir.join(format!("raster-{page}-{dpi}"));
    let status = Command::new("pdftoppm")
        .args([
            "-r",
            &dpi.to_string(),
            "-f",
            &page.to_string(),
            "-l",
            &page.to_string(),
        ])
        .args(["-gray", "-singlefile"])
        .arg(pdf)
        .arg(&stem)
        .status()
        .expect("pdftoppm (poppler-utils) is installed by scripts/setup.sh");
    assert!(status.success());
    let pgm = std::fs::read(stem.with_extension("pgm")).unwrap();
    // "P5\n<width> <height>\n255\n" then the pixels.
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 {
        while pgm[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        while !pgm[at].is_ascii_whitespace() {
            at += 1;
        }
        fields.push(String::from_utf8(pgm[start..at].to_vec()).unwrap());
    }
    assert_eq!(fields[0], "P5");
    let width: usize = fields[1].parse().unwrap();
    let height: usize = fields[2].parse().unwrap();
    let pixels = pgm[at + 1..].to_vec();
    assert_eq!(pixels.len(), width * height);
    Grey {
        width,
        height,
        pixels,
    }
}

/// An image-only PDF: one page per picture, each drawn over a US Letter page, no text layer.
/// `text_pages` (index, lines) put a text page in instead at that index (a mixed PDF).
pub fn image_pdf(pictures: &[Option<&Grey>], text_pages: &[&[&str]]) -> Vec<u8> {
    let mut objects: Vec<Vec<u8>> = Vec::new();
    let count = pictures.len();
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    let kids: Vec<String> = (0..count).map(|i| format!("{} 0 R", 4 + 3 * i)).collect();
    objects.push(
        format!(
            "<< /Type /Pages /Kids [{}] /Count {count} >>",
            kids.join(" ")
        )
        .into_bytes(),
    );
    objects.push(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    );
    let mut text_pages = text_pages.iter();
    for (index, picture) in pictures.iter().enumerate() {
        let (page, content, image) = (4 + 3 * index, 5 + 3 * index, 6 + 3 * index);
        let (draw, image_object) = match picture {
            Some(grey) => {
                let mut encoder =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                encoder.write_all(&grey.pixels).unwrap();
                let packed = encoder.finish().unwrap();
                let mut object = format!(
                    "<< /Type /XObject /Subtype /Image /Width {} /Height {} /ColorSpace \
                     /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode /Length {} >>\nstream\n",
                    grey.width,
                    grey.height,
                    packed.len()
                )
                .into_bytes();
                object.extend_from_slice(&packed);
                object.extend_from_slice(b"\nendstream");
                ("q 612 0 0 792 0 0 cm /Im0 Do Q".to_owned(), object)
            }
            None => {
                let lines = text_pages.next().expect("a text page for each None");
                let mut draw = String::from("BT /F1 12 Tf 16 TL 60 760 Td\n");
                for line in *lines {
                    draw.push_str(&format!("{} Tj T*\n", pdf_string(line)));
                }
                draw.push_str("ET");
                (draw, b"<< /Type /XObject /Subtype /Form /BBox [0 0 1 1] /Length 0 >>\nstream\n\nendstream".to_vec())
            }
        };
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << \
                 /XObject << /Im0 {image} 0 R >> /Font << /F1 3 0 R >> >> /Contents {content} 0 R >>"
            )
            .into_bytes(),
        );
        let _ = page;
        let mut stream = format!("<< /Length {} >>\nstream\n", draw.len()).into_bytes();
        stream.extend_from_slice(draw.as_bytes());
        stream.extend_from_slice(b"\nendstream");
        objects.push(stream);
        objects.push(image_object);
    }
    super::pdf_of(&objects)
}

/// Text as compared: letters and digits and single spaces, lowercase kept (OCR's case errors
/// count), so that line breaks and spacing do not.
pub fn normalized(text: &str) -> Vec<char> {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .collect()
}

/// The character error rate of `read` against `truth`: edits (insert, delete, substitute) to
/// turn one into the other, over the truth's characters, both `normalized`.
pub fn character_error_rate(read: &str, truth: &str) -> f64 {
    let (a, b) = (normalized(read), normalized(truth));
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()] as f64 / b.len().max(1) as f64
}

//! `idem-check matrix` over the example reports in fixtures/matrix/ (the reference server and
//! two of its fault modes): golden Markdown and HTML, and the HTML's structure.

use std::path::{Path, PathBuf};

use idem_check::matrix;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/matrix")
}

fn example() -> matrix::Matrix {
    let inputs: Vec<String> = ["1-reference.json", "2-race.json", "3-replay-reexecute.json"]
        .iter()
        .map(|f| dir().join(f).to_string_lossy().into_owned())
        .collect();
    matrix::build(matrix::load(&inputs).expect("example reports load"))
}

fn golden(name: &str, actual: &str) {
    let path = dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert!(
        expected == actual,
        "{name} differs from its golden (UPDATE_GOLDEN=1 rewrites it):\n{}",
        similar::TextDiff::from_lines(expected.as_str(), actual).unified_diff()
    );
}

/// The reference server is the baseline column and passes everything; each fault mode fails
/// its probe with a footnote.
#[test]
fn example_matrix_has_the_baseline_first_and_footnotes() {
    let m = example();
    assert_eq!(m.columns[0], "reference");
    assert!(m.baseline[0]);
    assert!(m.rows.iter().all(|(_, cells)| cells[0].outcome == "PASS"));
    let race = m
        .columns
        .iter()
        .position(|c| c == "reference+race")
        .unwrap();
    let (_, cells) = m
        .rows
        .iter()
        .find(|(id, _)| id == "concurrent-duplicates")
        .unwrap();
    assert_eq!(cells[race].outcome, "FAIL");
    assert_eq!(cells[race].severity.as_deref(), Some("critical"));
    assert!(!m.notes.is_empty());
}

#[test]
fn markdown_matches_golden() {
    golden("matrix.md", &matrix::markdown::render(&example()));
}

/// The page is well-formed, holds one row per probe and one column per report, and every
/// footnote link has its target.
#[test]
fn html_matches_golden_and_is_well_formed() {
    let m = example();
    let html = matrix::html::render(&m);
    golden("matrix.html", &html);
    let body = html.trim_start_matches("<!DOCTYPE html>\n");
    let mut reader = quick_xml::Reader::from_str(body);
    let (mut rows, mut header_cells, mut links, mut anchors) = (0, 0, Vec::new(), Vec::new());
    let mut in_thead = false;
    loop {
        match reader.read_event().expect("the page is well-formed") {
            quick_xml::events::Event::Start(e) => {
                let attr = |name: &[u8]| {
                    e.attributes()
                        .flatten()
                        .find(|a| a.key.as_ref() == name)
                        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                };
                match e.name().as_ref() {
                    b"thead" => in_thead = true,
                    b"th" if in_thead => header_cells += 1,
                    b"tr" if !in_thead => rows += 1,
                    b"a" => links.extend(attr(b"href")),
                    b"li" => anchors.extend(attr(b"id")),
                    _ => {}
                }
            }
            quick_xml::events::Event::End(e) if e.name().as_ref() == b"thead" => in_thead = false,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(rows, m.rows.len());
    assert_eq!(header_cells, m.columns.len() + 1);
    assert_eq!(links.len(), m.notes.len());
    for l in links {
        assert!(
            anchors.contains(&l.trim_start_matches('#').to_string()),
            "dangling {l}"
        );
    }
}

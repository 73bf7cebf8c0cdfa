//! What the reports' plots share (`ferry eval`'s `eval_report.rs`, `ferry bench`'s
//! `bench/report.rs`): the DejaVu Sans file embedded in the binary, registered as plotters'
//! "sans-serif" (so PNG text needs no system fonts), and drawing one figure into an SVG or a PNG
//! file by the file's extension. It never decides what a plot shows.

use std::path::Path;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Registers the embedded font as "sans-serif"; call it before drawing text.
pub(crate) fn register_font() {
    // Ignoring a second registration's error: the font is the same.
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
}

/// A figure that can be drawn on any plotters backend (the same code draws the SVG and the PNG).
pub(crate) trait Figure {
    fn render<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Draws `figure` into an SVG or PNG file, by its extension.
pub(crate) fn draw(path: &Path, figure: &impl Figure, size: (u32, u32)) -> Result<()> {
    let result = if path.extension().is_some_and(|e| e == "svg") {
        figure.render(SVGBackend::new(path, size).into_drawing_area())
    } else {
        figure.render(BitMapBackend::new(path, size).into_drawing_area())
    };
    result.map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))
}

/// plotters' errors as text (its error types are generic over the backend).
pub(crate) fn e<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

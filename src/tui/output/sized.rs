//! A backend that remembers the terminal's size between frames.
//!
//! Every `Terminal::draw` asks the backend for the size (ratatui's autoresize), and
//! crossterm answers by opening `/dev/tty` and asking the kernel (`TIOCGWINSZ`) each time:
//! two system calls and a path lookup a frame, a few percent of a redraw. The size only
//! changes with a resize, which reaches the loop as `Event::Resize`; the loop then calls
//! `forget_size` and the next frame asks again. As a guard against a resize event lost
//! (one that came before the input thread listened), the size is asked again anyway once
//! it is `SIZE_TTL` old.
//!
//! Likewise ratatui hides the cursor on every frame, and crossterm flushes that at once: a
//! second write to the terminal each frame, ~9 % of the main thread at 1 s. The
//! cursor stays hidden until something else has the screen, which is when the size is
//! forgotten too, so it is hidden again only then.

use std::cell::Cell as StdCell;
use std::time::{Duration, Instant};

use ratatui::backend::{Backend, ClearType, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};

/// Longest a remembered size is trusted without a resize event.
const SIZE_TTL: Duration = Duration::from_secs(5);

pub(crate) struct SizedBackend<B> {
    inner: B,
    size: StdCell<Option<(Size, Instant)>>,
    /// The cursor was hidden through this backend and nobody else has had the screen since.
    hidden: StdCell<bool>,
}

impl<B: Backend> SizedBackend<B> {
    pub(crate) fn new(inner: B) -> Self {
        SizedBackend {
            inner,
            size: StdCell::new(None),
            hidden: StdCell::new(false),
        }
    }

    /// The terminal may have been resized, or had by a shell (which shows the cursor): ask
    /// its size at the next frame and hide the cursor again.
    pub(crate) fn forget_size(&self) {
        self.size.set(None);
        self.hidden.set(false);
    }
}

impl<B: Backend> Backend for SizedBackend<B> {
    type Error = B::Error;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }

    fn append_lines(&mut self, n: u16) -> Result<(), Self::Error> {
        self.inner.append_lines(n)
    }

    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        if self.hidden.get() {
            return Ok(());
        }
        self.inner.hide_cursor()?;
        self.hidden.set(true);
        Ok(())
    }

    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.hidden.set(false);
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> Result<Size, Self::Error> {
        if let Some((size, at)) = self.size.get()
            && at.elapsed() < SIZE_TTL
        {
            return Ok(size);
        }
        let size = self.inner.size()?;
        self.size.set(Some((size, Instant::now())));
        Ok(size)
    }

    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;

    #[test]
    fn the_size_is_asked_again_only_when_forgotten() {
        let mut b = SizedBackend::new(TestBackend::new(120, 40));
        assert_eq!(b.size().ok(), Some(Size::new(120, 40)));
        b.inner.resize(80, 24);
        // No resize event yet: the remembered size.
        assert_eq!(b.size().ok(), Some(Size::new(120, 40)));
        b.forget_size();
        assert_eq!(b.size().ok(), Some(Size::new(80, 24)));
    }

    #[test]
    fn the_cursor_is_hidden_once_until_the_screen_was_someone_elses() {
        let mut term =
            ratatui::Terminal::new(SizedBackend::new(TestBackend::new(20, 4))).expect("terminal");
        term.draw(|_| {}).expect("draw");
        assert!(
            !term.backend().inner.cursor_visible(),
            "the first draw hides it"
        );
        // Shown behind the backend's back: the next draws do not hide it again (each hide
        // is a write and a flush on a real terminal)...
        term.backend_mut().inner.show_cursor().expect("show");
        term.draw(|_| {}).expect("draw");
        term.draw(|_| {}).expect("draw");
        assert!(term.backend().inner.cursor_visible());
        // ...until the loop says the screen was someone else's.
        term.backend().forget_size();
        term.draw(|_| {}).expect("draw");
        assert!(
            !term.backend().inner.cursor_visible(),
            "hidden again after forget_size"
        );
    }
}

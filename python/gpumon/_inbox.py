"""The queue from program threads to the companion thread.

Bounded, because the companion thread can fall behind (or be gone) while the
program keeps calling mark()/epoch(): the oldest item is dropped and counted, so
the program never waits and its memory never grows. Dropping the oldest keeps
the newest state and a final ("bye", ...) item, which stop() appends last.
"""

import collections

MAX_INBOX = 10000


class Inbox(collections.deque):
    def __init__(self, limit=MAX_INBOX):
        super(Inbox, self).__init__(maxlen=limit)
        # Approximate under races between program threads (an int += is not
        # atomic), which is fine for a diagnostic count.
        self.dropped = 0

    def append(self, item):
        if len(self) >= self.maxlen:
            self.dropped += 1
        super(Inbox, self).append(item)

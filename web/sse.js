// Server-Sent Events from a fetch body: EventSource can only GET, and /ask is a POST.

/**
 * Yields {event, data} for each event of `body` (a ReadableStream of bytes), `data` parsed as JSON, as each
 * arrives. Comments and fields other than event and data are skipped; a line ends at CRLF, LF or CR.
 */
export async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let event = 'message';
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      for (;;) {
        const end = buffer.search(/\r\n|\r|\n/);
        // A CR last in the buffer may be half of a CRLF: wait for the next chunk.
        if (end < 0 || (buffer[end] === '\r' && end === buffer.length - 1)) break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (data.length) yield { event, data: JSON.parse(data.join('\n')) };
          event = 'message';
          data = [];
        } else if (!line.startsWith(':')) {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let value_ = colon < 0 ? '' : line.slice(colon + 1);
          if (value_.startsWith(' ')) value_ = value_.slice(1);
          if (field === 'event') event = value_;
          else if (field === 'data') data.push(value_);
        }
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

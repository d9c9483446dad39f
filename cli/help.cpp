#include "gpufilter/cli/options.hpp"

namespace gpufilter::cli {

namespace {

// The text is data, not logic: kept whole, in grep's order and wording where it applies.
// An option added here goes into docs/man/gpufilter.1.scd and completions/ too: the
// options_documented test (tests/install/) fails until it does.
constexpr const char* kHelp = R"(Usage: gpufilter [OPTION]... PATTERNS [FILE]...
Search for PATTERNS in each FILE, as GNU grep does; the literal search (and
the required literals of each regular expression) runs on a GPU through OpenCL.
Example: gpufilter -i 'hello world' menu.h main.c
PATTERNS can contain multiple patterns separated by newlines.

Pattern selection and interpretation:
  -E, --extended-regexp     PATTERNS are extended regular expressions
  -F, --fixed-strings       PATTERNS are strings
  -G, --basic-regexp        PATTERNS are basic regular expressions (default)
  -P, --perl-regexp         PATTERNS are Perl regular expressions (one pattern)
  -e, --regexp=PATTERNS     use PATTERNS for matching
  -f, --file=FILE           take PATTERNS from FILE
  -i, --ignore-case         ignore case distinctions in patterns and data
      --no-ignore-case      do not ignore case distinctions (default)
  -w, --word-regexp         match only whole words
  -x, --line-regexp         match only whole lines
  -y                        same as -i
  -z, --null-data           a data line ends in 0 byte, not newline

Miscellaneous:
  -s, --no-messages         suppress error messages
  -v, --invert-match        select non-matching lines
  -V, --version             display version information and exit
      --help                display this help text and exit

Output control:
  -m, --max-count=NUM       stop after NUM selected lines
  -b, --byte-offset         print the byte offset with output lines
  -n, --line-number         print line number with output lines
      --line-buffered       flush output on every line
  -H, --with-filename       print file name with output lines
  -h, --no-filename         suppress the file name prefix on output
      --label=LABEL         use LABEL as the standard input file name prefix
  -o, --only-matching       show only nonempty parts of lines that match
  -q, --quiet, --silent     suppress all normal output
      --binary-files=TYPE   assume that binary files are TYPE;
                            TYPE is 'binary', 'text', or 'without-match'
  -a, --text                equivalent to --binary-files=text
  -I                        equivalent to --binary-files=without-match
  -d, --directories=ACTION  how to handle directories;
                            ACTION is 'read', 'recurse', or 'skip'
  -D, --devices=ACTION      how to handle devices, FIFOs and sockets;
                            ACTION is 'read' or 'skip'
  -r, --recursive           like --directories=recurse
  -R, --dereference-recursive  likewise, but follow all symlinks
      --include=GLOB        search only files that match GLOB (a file pattern)
      --exclude=GLOB        skip files that match GLOB
      --exclude-from=FILE   skip files that match any file pattern from FILE
      --exclude-dir=GLOB    skip directories that match GLOB
  -L, --files-without-match  print only names of FILEs with no selected lines
  -l, --files-with-matches  print only names of FILEs with selected lines
  -c, --count               print only a count of selected lines per FILE
  -T, --initial-tab         make tabs line up (if needed)
  -Z, --null                print 0 byte after FILE name
  -U, --binary              do not strip CR characters at EOL (MSDOS/Windows)

Context control:
  -B, --before-context=NUM  print NUM lines of leading context
  -A, --after-context=NUM   print NUM lines of trailing context
  -C, --context=NUM         print NUM lines of output context
  -NUM                      same as --context=NUM
      --group-separator=SEP  print SEP on line between matches with context
      --no-group-separator  do not print separator for matches with context
      --color[=WHEN],
      --colour[=WHEN]       use markers to highlight the matching strings;
                            WHEN is 'always', 'never', or 'auto'

GPU and streaming:
      --pattern-counts      after the output, print how often each pattern
                            occurs (every start position, overlaps included)
      --list-devices        list OpenCL platforms and devices and exit
      --device=SPEC         gpu, cpu, PLATFORM:DEVICE from --list-devices, or
                            all (every GPU); several (repeated or a comma list)
                            share the input (default: $GPUFILTER_DEVICE, else
                            the first GPU, else the first CPU device)
      --chunk-size=SIZE     bytes per chunk (K, M, G suffixes)
      --slots=N             chunks in flight at once (default 4 on a GPU,
                            3 on a CPU device, per device; cores + 2 on the
                            host engine)
      --engine=ENGINE       auto, opencl (the OpenCL device, a GPU or PoCL;
                            also 'gpu'), host (Hyperscan on every core;
                            also 'cpu') or both (the two together); auto picks
                            by device, pattern count and input, --stats says
                            why (docs/PERFORMANCE.md)
      --stats               at exit, print timings as one JSON line on stderr
      --no-progress         no progress line (shown on a terminal standard
                            error after a second of scanning, when the
                            output is not that terminal or is -c/-l/-L/-q)
  -j, --threads=NUM         search up to NUM files at once (default: one per
                            core; 1: one after another); output stays in order;
                            captures: packets (--stream: flows) on NUM threads
      --batch-timeout=MS    longest wait of a line on a slow input (default 2)
      --host-scan-below=SIZE  scan chunks smaller than SIZE on the host,
                            where a device round trip costs more (default
                            16K with a device engine; 0: never)
      --json                ripgrep's JSON Lines (rg --json): begin, match,
                            context, end and summary records, plus the
                            patterns that matched (docs/JSON.md)
      --decompress          read gzip, zstd, xz, bzip2 and lz4 inputs (told
                            by their first bytes, not their names) as the
                            text they hold; other inputs are read as they are

Following files and listening on sockets (docs/STREAMING.md):
      --follow              follow each FILE as it grows, like tail -F:
                            across rotation, truncation and re-creation
      --from-start          with --follow, read what the files hold already
                            (default: only what is written from now on)
      --state=FILE          with --follow, keep each file's position in FILE
                            and resume there on the next run
      --poll-interval=MS    with --follow, poll every MS instead of inotify
      --listen=URL          read lines from tcp://HOST:PORT, udp://HOST:PORT
                            or unix:PATH (repeatable; port 0 picks one; no
                            HOST is 127.0.0.1, every address only when
                            written: 0.0.0.0 or [::]); TCP and unix also
                            take RFC 6587 octet-counted syslog frames
      --kafka=URL           read Kafka records as lines (one stream per
                            partition): kafka://HOST:PORT/TOPIC[,TOPIC]
                            [?group=NAME&PROPERTY=VALUE...]; with a group,
                            offsets are committed once lines are written;
                            without one, topics are read from their start
      --max-line-bytes=SIZE  drop (and count) longer lines of followed
                            files, sockets and records (default 1M)
      --max-connections=N   with --listen, at most N open connections
                            (default 1024)
SIGINT or SIGTERM: stop reading, finish what was read, flush, exit 0;
a second one ends the process at once.

Captures (docs/CAPTURES.md):
      --pcap=FILE           filter the packets of a pcap or pcapng FILE ('-':
                            standard input); repeatable
      --interface=IFACE     capture live on IFACE (needs CAP_NET_RAW or root)
      --bpf=EXPR            keep only packets matching the BPF expression EXPR
      --match-frame         match the whole frame, not the transport payload
      --stream              reassemble TCP flows and match each direction's
                            byte stream; a match selects the whole flow
  -X, --hex                 PATTERNS are hex strings (deadbeef, 0xdeadbeef,
                            de:ad:be:ef);
                            fixed strings, like --escapes. With -E, -G or -P
                            a payload is read as lines, each matched as grep
                            matches a line
      --escapes             \xHH, \0, \n, \r, \t and \\ in PATTERNS
      --pcap-out=FILE       write the selected packets (flows) as a capture;
                            to standard output ('-'), nothing else is printed
      --hexdump             print payloads as hex and ASCII
      --byline              print each line of a payload as a line
      --time=WHEN           packet times: absolute, relative, delta or epoch
      --max-packets=NUM     read at most NUM packets
  In captures PATTERNS are extended regexes (-E) unless -F, -G or -P is given,
  as ngrep reads them. -o, -b, --color, -A/-B/-C (packets; bytes with
  --stream), -l and -L apply per packet (flow); operands after PATTERNS are a
  BPF expression.

Regular expressions are GNU grep's (docs/grep-compatibility.md says what is
refused and why); --stats counts the candidate lines of the GPU prefilter.
When FILE is '-', read standard input.  With no FILE, read '.' if
recursive, '-' otherwise.  With fewer than two FILEs, assume -h.
Exit status is 0 if any line is selected, 1 otherwise;
if any error occurs and -q is not given, the exit status is 2.
)";

}  // namespace

const char* help_text() { return kHelp; }

const char* version_text() {
  return "gpufilter " GPUFILTER_VERSION R"(
Copyright (C) 2026 the gpufilter authors.
Literal matching runs in OpenCL kernels; output follows GNU grep 3.8 (-F, -G,
-E and -P, in the C locale and in UTF-8 locales).
This is free software: you are free to change and redistribute it.
There is NO WARRANTY, to the extent permitted by law.

Written by the gpufilter authors.
)";
}

}  // namespace gpufilter::cli

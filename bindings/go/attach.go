package snowflake

// attach (segment format 4): the consumer region is no file in the runtime directory but
// a sealed memfd that the daemon hands to each client over its control socket. These are
// the steps 2-7 of the spec (shm/LAYOUT.md §1): connect, check the peer is the daemon's
// user, ask, receive one descriptor with the reply (SCM_RIGHTS), check the descriptor
// before mapping anything, map it, close it. openSegment (segment.go) runs step 1 (the
// ring file) before and step 8 (the pairing of the two) after.
//
// Holding the descriptor is what lets a process take: the daemon answers attach for any
// process that may connect to the socket (its group). The seals (shrink, grow, seal) are
// what make the mapping safe: no process, the daemon included, can resize the memory under
// a taker, so a take can never touch a lost page (the SIGBUS a truncated file gave).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// How long Open lets the daemon refuse attach with a "retry" (too_many_connections,
// daemon_starting) before it reports the refusal. A variable only so a test can wait less.
var attachBudget = 10 * time.Second

const (
	controlSocketName = "control.sock"
	attachRequest     = "{\"command\":\"attach\"}\n"
	// F_GET_SEALS (linux/fcntl.h: F_LINUX_SPECIFIC_BASE + 10), which package syscall does not
	// name.
	fGetSeals = 1034
	// F_SEAL_EXEC (linux/fcntl.h, Linux 6.3), which a region made with MFD_NOEXEC_SEAL carries.
	execSeal = 0x20

	// The longest reply line read; the accepted one is under 100 bytes.
	attachReplyMax = 64 << 10
	// Descriptors one read makes room for: the reply carries one; any more are closed.
	attachFDRoom = 4
)

func controlSocketPath(runtimeDir string) string {
	return filepath.Join(runtimeDir, controlSocketName)
}

// The outcome of an attach that mapped no region.
type attachOutcome int

const (
	attachDone   attachOutcome = iota // the region, or an error to report
	attachRetry                       // a refusal the daemon may stop giving shortly
	attachAbsent                      // no daemon answers: the ring file's header tells takes why
)

// attachRegion maps the consumer region of s's daemon into s.consumer and returns the
// segment id of the daemon's reply. A refusal the daemon asks to retry (too_many_connections,
// daemon_starting) is retried with a short backoff while deadline allows (one attempt at
// least), unless the ring file's header says meanwhile that its daemon no longer answers
// (gone). absent: no daemon answered (no socket, nothing listening, or gone); e is nil then.
func attachRegion(s *segment, deadline time.Time, gone func() bool) (replyID uint64,
	absent bool, e *Error) {
	backoff := time.Millisecond
	for {
		id, e, outcome := attachOnce(s)
		switch {
		case e == nil:
			return id, false, nil
		case outcome == attachAbsent:
			return 0, true, nil
		case outcome != attachRetry:
			return 0, false, e
		case gone():
			return 0, true, nil
		case time.Now().Add(backoff).After(deadline):
			return 0, false, e
		}
		time.Sleep(backoff)
		if backoff < 64*time.Millisecond {
			backoff *= 2
		}
	}
}

// attachOnce is one connection: steps 2-7.
func attachOnce(s *segment) (replyID uint64, e *Error, outcome attachOutcome) {
	sock := controlSocketPath(s.dir)
	// Step 2.
	conn, err := net.DialTimeout("unix", sock, controlTimeout)
	if err != nil {
		return dialError(sock, err)
	}
	defer conn.Close()
	uc := conn.(*net.UnixConn)
	uc.SetDeadline(time.Now().Add(controlTimeout))
	// Step 3: the listener runs as the daemon's user, the owner of the ring file.
	if e := checkPeer(uc, s, sock); e != nil {
		return 0, e, attachDone
	}
	// Step 4. A failed write is reported only when no reply can be read: a daemon refusing
	// the connection (too_many_connections) may have answered and closed before it.
	_, writeErr := uc.Write([]byte(attachRequest))
	// Step 5.
	line, fds, err := readReplyLine(uc)
	defer func() { closeFDs(fds) }()
	if err != nil {
		if writeErr != nil && len(line) == 0 {
			err = writeErr
		}
		return 0, replyReadError(sock, line, err), attachDone
	}
	var reply struct {
		OK            *bool   `json:"ok"`
		Code          string  `json:"code"`
		Error         string  `json:"error"`
		SegmentID     *string `json:"segment_id"`
		FormatVersion *uint64 `json:"format_version"`
	}
	if err := json.Unmarshal(line, &reply); err != nil || reply.OK == nil {
		return 0, badReply(fmt.Sprintf("%s answered attach with %q, not the protocol's "+
			"reply object", sock, truncateText(line))), attachDone
	}
	if !*reply.OK {
		return refusal(s, sock, reply.Code, reply.Error)
	}
	// Step 6: the descriptor, before anything is mapped.
	if len(fds) == 0 {
		return 0, badReply("snowflaked answered attach on " + sock + " without a descriptor"),
			attachDone
	}
	if reply.SegmentID == nil {
		return 0, badReply("snowflaked answered attach on " + sock + " without a segment_id"),
			attachDone
	}
	if replyID, err = strconv.ParseUint(*reply.SegmentID, 10, 64); err != nil {
		return 0, badReply(fmt.Sprintf("snowflaked answered attach on %s with segment_id %q, "+
			"not a decimal u64", sock, *reply.SegmentID)), attachDone
	}
	fd := fds[0]
	if e := checkRegionFD(fd, s, sock); e != nil {
		return 0, e, attachDone
	}
	if reply.FormatVersion == nil || *reply.FormatVersion != layoutVersion {
		version := "no format"
		if reply.FormatVersion != nil {
			version = "segment format " + strconv.FormatUint(*reply.FormatVersion, 10)
		}
		return 0, segFail(segIncompatibleVersion, fmt.Sprintf("snowflaked in %s serves %s, "+
			"this library speaks format %d: run a daemon and client library of the same "+
			"release (restart the service after the package upgrade)", s.dir, version,
			layoutVersion)), attachDone
	}
	// Step 7: map it, and close the descriptor at once: the mapping keeps the memory.
	s.consumer, e = mapRegion(fd, 0, regionSize, true, "the consumer region from "+sock)
	closeFDs(fds)
	fds = nil
	if e != nil {
		return 0, e, attachDone
	}
	return replyID, nil, attachDone
}

// badReply is an answer that does not follow this library's attach: a daemon of another
// release (or no snowflaked at all) listens there.
func badReply(what string) *Error {
	return segFail(segBadReply, what+" (the daemon does not speak this library's attach: "+
		"run a daemon and client library of the same release; restart the service after "+
		"the package upgrade)")
}

// dialError is step 2's failure. No socket, or nothing listening on it, is no daemon: the
// segment is then mapped without its region, and takes report what the ring file's header
// says (stopped, dead) or that the daemon did not hand over its region.
func dialError(sock string, err error) (uint64, *Error, attachOutcome) {
	var errno syscall.Errno
	errors.As(err, &errno)
	switch errno {
	case syscall.ENOENT, syscall.ECONNREFUSED:
		what := "no control socket at " + sock
		if errno == syscall.ECONNREFUSED {
			what = "nothing listens on " + sock
		}
		return 0, segFail(segNotFound, what+": snowflaked is not running with this runtime "+
			"directory"), attachAbsent
	case syscall.EACCES, syscall.EPERM:
		var info syscall.Stat_t
		if syscall.Stat(sock, &info) != nil {
			return 0, segFail(segPermissionDenied, "permission denied connecting to "+sock+
				": add this user to the daemon's clients' group and log in again"), attachDone
		}
		return 0, segFail(segPermissionDenied, "permission denied connecting to "+sock+" (mode "+
			fmt.Sprintf("%04o", info.Mode&07777)+", "+describeGroup(info.Gid)+"): "+
			groupAccessAdvice(info.Gid, "add this user to "+describeGroup(info.Gid)+
				" and log in again")), attachDone
	case syscall.EAGAIN:
		// The listen backlog is full: as a too_many_connections refusal.
		return 0, newError(statusTimedOut, "snowflaked did not accept a connection on "+sock+
			" in the time allowed (its backlog is full); retry or fail over"), attachRetry
	}
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		return 0, newError(statusTimedOut, "snowflaked did not accept a connection on "+sock+
			" within "+controlTimeout.String()+"; it may be hung"), attachDone
	}
	return 0, segFail(segSystemError, "cannot connect to "+sock+": "+err.Error()), attachDone
}

// checkPeer is step 3: SO_PEERCRED of the connected socket names the listener's user.
func checkPeer(uc *net.UnixConn, s *segment, sock string) *Error {
	raw, err := uc.SyscallConn()
	if err != nil {
		return segFail(segSystemError, "cannot read the peer of "+sock+": "+err.Error())
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		credErr = err
	}
	if credErr != nil {
		return segFail(segSystemError, "cannot read the peer of "+sock+": SO_PEERCRED: "+
			credErr.Error())
	}
	if cred.Uid != s.owner {
		return segFail(segWrongOwner, "the process listening on "+sock+" runs as "+
			describeUser(cred.Uid)+", not as the daemon's user "+describeUser(s.owner)+
			" (the owner of "+s.path+"); refusing it")
	}
	return nil
}

// readReplyLine is step 5: bytes up to the first newline, and every descriptor that came
// with them (MSG_CMSG_CLOEXEC: net's ReadMsgUnix sets it on Linux). err is nil only with
// a whole line.
func readReplyLine(uc *net.UnixConn) (line []byte, fds []int, err error) {
	buf := make([]byte, 512)
	oob := make([]byte, syscall.CmsgSpace(attachFDRoom*4))
	for {
		n, oobn, _, _, readErr := uc.ReadMsgUnix(buf, oob)
		if oobn > 0 {
			fds = append(fds, parseRights(oob[:oobn])...)
		}
		line = append(line, buf[:n]...)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			return line[:i], fds, nil
		}
		if readErr != nil {
			return line, fds, readErr
		}
		if n == 0 {
			return line, fds, io.EOF
		}
		if len(line) > attachReplyMax {
			return line, fds, errors.New("a reply line longer than " +
				strconv.Itoa(attachReplyMax) + " bytes")
		}
	}
}

// parseRights is every descriptor of the SCM_RIGHTS messages in oob.
func parseRights(oob []byte) []int {
	messages, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range messages {
		if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_RIGHTS {
			continue
		}
		if got, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// replyReadError: no whole reply line.
func replyReadError(sock string, line []byte, err error) *Error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return newError(statusTimedOut, "snowflaked did not answer attach on "+sock+" within "+
			controlTimeout.String()+"; it may be hung: retry or fail over")
	}
	if len(line) == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)) {
		return badReply("snowflaked closed " + sock + " without answering attach")
	}
	if len(line) > 0 {
		return badReply(fmt.Sprintf("snowflaked answered attach on %s with %q and no end of "+
			"line (%v)", sock, truncateText(line), err))
	}
	return segFail(segSystemError, "cannot read the answer to attach from "+sock+": "+
		err.Error())
}

// refusal is an {"ok":false} reply: the codes a taker must handle (spec, step 5), a code
// of the library's statuses as that status, and any other as a system error in the
// daemon's words.
func refusal(s *segment, sock, code, message string) (uint64, *Error, attachOutcome) {
	says := ""
	if message != "" {
		says = ": " + message
	}
	switch code {
	case "too_many_connections", "daemon_starting":
		return 0, newError(statusTimedOut, "snowflaked did not hand over its consumer region "+
			"within "+strconv.FormatInt(attachBudget.Milliseconds(), 10)+" ms ("+code+says+
			"); retry or fail over"), attachRetry
	case "unknown_command":
		return 0, newError(statusIncompatibleVersion, "snowflaked predates segment format 4: "+
			"its control socket "+sock+" does not know attach ("+message+"); run a daemon and "+
			"client library of the same release: restart the service after the package "+
			"upgrade"), attachDone
	}
	for status := 1; status <= lastStatus; status++ {
		if statusCodes[status] == code {
			return 0, newError(status, "snowflaked refused attach on "+sock+says), attachDone
		}
	}
	return 0, newError(statusSystemError, "snowflaked refused attach on "+sock+": "+code+
		says), attachDone
}

// checkRegionFD is step 6's check of the descriptor: a regular file (a memfd is one) of
// the daemon's user, sealed exactly against resizing, of the region's size. The seals are
// checked before the size, as the C++ client does: an unsealed region's size is whatever
// its holder makes it, so the seals are what is wrong with it.
func checkRegionFD(fd int, s *segment, sock string) *Error {
	var info syscall.Stat_t
	if err := syscall.Fstat(fd, &info); err != nil {
		return segFail(segSystemError, "cannot fstat the consumer region from "+sock+": "+err.Error())
	}
	if info.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return segFail(segNotRegularFile, sock+": the consumer region is not a memory file (a "+
			"socket, pipe, directory or device); refusing to map it")
	}
	if info.Uid != s.owner {
		return segFail(segWrongOwner, sock+": the consumer region is owned by "+
			describeUser(info.Uid)+", not by the daemon's user "+describeUser(s.owner)+
			" (the owner of "+s.path+"); refusing to map it")
	}
	seals, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fGetSeals, 0)
	// F_SEAL_EXEC (0x20, Linux 6.3: never executable) may be set too, as the C++ client allows.
	if errno != 0 || seals&^execSeal != consumerRegionSeals {
		how := fmt.Sprintf("sealed with %s (%#x)", sealNames(seals), seals)
		if errno != 0 {
			how = "not sealable (" + errno.Error() + ")"
		}
		return segFail(segUnsealed, fmt.Sprintf("%s: the consumer region is %s, not exactly "+
			"seal|shrink|grow (%#x, with exec or not): any process holding it could resize it "+
			"under every taker; refusing to map it", sock, how, consumerRegionSeals))
	}
	if size := uint64(info.Size); size != regionSize {
		kind := segTruncated
		if size > regionSize {
			kind = segSizeMismatch
		}
		return segFail(kind, fmt.Sprintf("%s: the consumer region is sealed with %d bytes, the "+
			"format's region is %d (sealed with the wrong size); refusing to map it", sock, size,
			regionSize))
	}
	return nil
}

// sealNames: "seal|shrink|grow", in the C++ client's order; "none" for no seal.
func sealNames(seals uintptr) string {
	names := ""
	for _, seal := range []struct {
		bit  uintptr
		name string
	}{{0x1, "seal"}, {0x2, "shrink"}, {0x4, "grow"}, {0x8, "write"}, {0x10, "future_write"},
		{execSeal, "exec"}} {
		if seals&seal.bit != 0 {
			if names != "" {
				names += "|"
			}
			names += seal.name
		}
	}
	if names == "" {
		return "none"
	}
	return names
}

// truncateText keeps a reply quoted in an error short.
func truncateText(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

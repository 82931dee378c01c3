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

const (
	controlSocketName = "control.sock"
	attachRequest     = "{\"command\":\"attach\"}\n"
	// F_GET_SEALS (linux/fcntl.h: F_LINUX_SPECIFIC_BASE + 10), which package syscall does not
	// name.
	fGetSeals = 1034
	// How long Open lets the daemon refuse attach with a "retry" (too_many_connections,
	// daemon_starting) before it reports the refusal.
	attachBudget = 5 * time.Second
	// The longest reply line read; the accepted one is under 100 bytes.
	attachReplyMax = 64 << 10
	// Descriptors one read makes room for: the reply carries one; any more are closed.
	attachFDRoom = 4
)

func controlSocketPath(runtimeDir string) string {
	return filepath.Join(runtimeDir, controlSocketName)
}

// attachRegion maps the consumer region of s's daemon into s.consumer and returns the
// segment id of the daemon's reply. A refusal the daemon asks to retry is retried with a
// short backoff while deadline allows (one attempt at least); then it is reported.
func attachRegion(s *segment, deadline time.Time) (uint64, *Error) {
	backoff := time.Millisecond
	for {
		id, e, retry := attachOnce(s)
		if !retry || time.Now().Add(backoff).After(deadline) {
			return id, e
		}
		time.Sleep(backoff)
		if backoff < 64*time.Millisecond {
			backoff *= 2
		}
	}
}

// attachOnce is one connection: steps 2-7. retry: the error is one the daemon may stop
// giving shortly (it is starting, or serves as many connections as it may).
func attachOnce(s *segment) (replyID uint64, e *Error, retry bool) {
	sock := controlSocketPath(s.dir)
	// Step 2.
	conn, err := net.DialTimeout("unix", sock, controlTimeout)
	if err != nil {
		e, retry = dialError(s, sock, err)
		return 0, e, retry
	}
	defer conn.Close()
	uc := conn.(*net.UnixConn)
	uc.SetDeadline(time.Now().Add(controlTimeout))
	// Step 3: the listener runs as the daemon's user, the owner of the ring file.
	if e := checkPeer(uc, s, sock); e != nil {
		return 0, e, false
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
		e, retry = replyReadError(sock, line, err)
		return 0, e, retry
	}
	var reply struct {
		OK            *bool   `json:"ok"`
		Code          string  `json:"code"`
		Error         string  `json:"error"`
		SegmentID     *string `json:"segment_id"`
		FormatVersion *uint64 `json:"format_version"`
	}
	if err := json.Unmarshal(line, &reply); err != nil || reply.OK == nil {
		return 0, segFail(segBadReply, fmt.Sprintf("%s answered attach with %q, not the "+
			"protocol's reply object; is snowflaked the process listening there?", sock,
			truncateText(line))), false
	}
	if !*reply.OK {
		e, retry = refusal(s, sock, reply.Code, reply.Error)
		return 0, e, retry
	}
	// Step 6: the descriptor, before anything is mapped.
	if len(fds) == 0 {
		return 0, segFail(segBadReply, sock+" answered attach without a descriptor: the "+
			"consumer region must come with the reply (SCM_RIGHTS); is snowflaked the process "+
			"listening there?"), false
	}
	if reply.SegmentID == nil {
		return 0, segFail(segBadReply, sock+" answered attach without a segment_id"), false
	}
	if replyID, err = strconv.ParseUint(*reply.SegmentID, 10, 64); err != nil {
		return 0, segFail(segBadReply, fmt.Sprintf("%s answered attach with segment_id %q, "+
			"not a decimal u64", sock, *reply.SegmentID)), false
	}
	fd := fds[0]
	if e := checkRegionFD(fd, s, sock); e != nil {
		return 0, e, false
	}
	if reply.FormatVersion == nil || *reply.FormatVersion != layoutVersion {
		version := "no"
		if reply.FormatVersion != nil {
			version = strconv.FormatUint(*reply.FormatVersion, 10)
		}
		return 0, segFail(segIncompatibleVersion, fmt.Sprintf("%s hands out a consumer region "+
			"of segment format version %s, this build speaks version %d; run a daemon and "+
			"client library of the same release", sock, version, layoutVersion)), false
	}
	// Step 7: map it, and close the descriptor at once: the mapping keeps the memory.
	s.consumer, e = mapRegion(fd, 0, regionSize, true, "the consumer region from "+sock)
	closeFDs(fds)
	fds = nil
	if e != nil {
		return 0, e, false
	}
	return replyID, nil, false
}

// dialError is step 2's failure.
func dialError(s *segment, sock string, err error) (*Error, bool) {
	var errno syscall.Errno
	errors.As(err, &errno)
	switch errno {
	case syscall.ENOENT, syscall.ECONNREFUSED:
		// No daemon answers: the ring file's header says why when its daemon stopped or
		// died, as a take would report it.
		r := headerRing(s)
		limit := r.heartbeatLimit(0)
		p := r.checkProducer(limit)
		switch p.health {
		case healthStopped, healthDead:
			return unavailableError(p, r, s.dir, limit), false
		case healthStarting:
			// A daemon that created its ring file and does not listen yet.
			return newError(statusDaemonStarting, "snowflaked is starting (runtime directory "+
				s.dir+"): it does not answer on "+sock+" yet; retry shortly or fail over"), true
		}
		what := "no control socket " + sock
		if errno == syscall.ECONNREFUSED {
			what = "nothing listens on " + sock
		}
		state := "unknown"
		if st := loadU32(s.header, offState); int(st) < len(stateCodes) {
			state = stateCodes[st]
		}
		return segFail(segNotFound, what+" (the ring file "+s.path+" says "+state+"): "+
			"snowflaked is not running for this runtime directory (start it, or point "+
			"SNOWFLAKE_RUNTIME_DIR at the right one)"), false
	case syscall.EACCES, syscall.EPERM:
		var info syscall.Stat_t
		if syscall.Stat(sock, &info) != nil {
			return segFail(segPermissionDenied, "permission denied connecting to "+sock+
				": add this user to the daemon's clients' group and log in again"), false
		}
		return segFail(segPermissionDenied, "permission denied connecting to "+sock+" (mode "+
			fmt.Sprintf("%04o", info.Mode&07777)+", "+describeGroup(info.Gid)+"): "+
			groupAccessAdvice(info.Gid, "add this user to "+describeGroup(info.Gid)+
				" and log in again")), false
	case syscall.EAGAIN:
		// The listen backlog is full: as a too_many_connections refusal.
		return newError(statusTimedOut, "snowflaked's control socket "+sock+" accepted no "+
			"connection for attach in the time allowed (its backlog is full); retry or fail over"), true
	}
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		return newError(statusTimedOut, "no connection to "+sock+" within "+
			controlTimeout.String()+"; retry or fail over"), false
	}
	return segFail(segSystemError, "cannot connect to "+sock+": "+err.Error()), false
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
func replyReadError(sock string, line []byte, err error) (*Error, bool) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return newError(statusTimedOut, "no answer to attach from "+sock+" within "+
			controlTimeout.String()+": snowflaked is hung or overloaded; retry or fail over"), false
	}
	if len(line) == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)) {
		// A daemon shutting down closes its connections.
		return segFail(segNotFound, sock+" closed the connection without answering attach: "+
			"snowflaked is stopping or restarting; retry, or fail over"), false
	}
	if len(line) > 0 {
		return segFail(segBadReply, fmt.Sprintf("%s answered attach with %q and no end of "+
			"line (%v)", sock, truncateText(line), err)), false
	}
	return segFail(segSystemError, "cannot read the answer to attach from "+sock+": "+
		err.Error()), false
}

// refusal is an {"ok":false} reply: the codes a taker must handle (spec, step 5), and any
// other as the daemon's words.
func refusal(s *segment, sock, code, message string) (*Error, bool) {
	says := ""
	if message != "" {
		says = " (" + message + ")"
	}
	switch code {
	case "too_many_connections":
		return newError(statusTimedOut, "snowflaked refused attach on "+sock+" with "+
			"too_many_connections for as long as allowed"+says+"; retry or fail over"), true
	case "daemon_starting":
		return newError(statusDaemonStarting, "snowflaked is starting (runtime directory "+
			s.dir+"): it has no segment to hand out yet"+says+"; retry shortly or fail over"), true
	case "unknown_command":
		return newError(statusIncompatibleVersion, "snowflaked predates segment format 4; "+
			"restart the service after the package upgrade (its control socket "+sock+
			" does not know attach"+says+")"), false
	}
	return newError(statusSystemError, "snowflaked refused attach on "+sock+": "+code+says), false
}

// checkRegionFD is step 6's check of the descriptor: a regular file (a memfd is one) of
// the daemon's user, sealed exactly against resizing, of the region's size. The seals are
// checked before the size, as the C++ client does: an unsealed region's size is whatever
// its holder makes it, so "not sealed" is the error that says what is wrong.
func checkRegionFD(fd int, s *segment, sock string) *Error {
	var info syscall.Stat_t
	if err := syscall.Fstat(fd, &info); err != nil {
		return segFail(segSystemError, "cannot fstat the consumer region from "+sock+": "+err.Error())
	}
	if info.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return segFail(segNotRegularFile, fmt.Sprintf("%s: the consumer region is not a "+
			"regular file (mode %#o; the daemon hands over a memfd); refusing to map it",
			sock, info.Mode))
	}
	if info.Uid != s.owner {
		return segFail(segWrongOwner, sock+": the consumer region is owned by "+
			describeUser(info.Uid)+", not by the daemon's user "+describeUser(s.owner)+
			" (the owner of "+s.path+"); refusing to map it")
	}
	seals, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fGetSeals, 0)
	if errno != 0 {
		return segFail(segUnsealed, fmt.Sprintf("%s: the consumer region is not sealed (seals "+
			"unknown, F_GET_SEALS: %v; expected shrink|grow|seal %#x); refusing to map it", sock,
			errno, consumerRegionSeals))
	}
	if seals != consumerRegionSeals {
		return segFail(segUnsealed, fmt.Sprintf("%s: the consumer region is not sealed (seals "+
			"%#x, expected shrink|grow|seal %#x); refusing to map it", sock, seals,
			consumerRegionSeals))
	}
	if size := uint64(info.Size); size != regionSize {
		kind := segTruncated
		if size > regionSize {
			kind = segSizeMismatch
		}
		return segFail(kind, fmt.Sprintf("%s: the consumer region is %d bytes, it must be %d: "+
			"sealed with the wrong size; refusing to map it", sock, size, regionSize))
	}
	return nil
}

// truncateText keeps a reply quoted in an error short.
func truncateText(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

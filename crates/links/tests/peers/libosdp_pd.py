"""libosdp as an OSDP peripheral device on a tty, driven by JSON lines.

stdout: {"ready": true}, then one line per command the panel sent.
stdin:  {"card": HEX, "bits": N, "format": "wiegand"|"raw"}, {"keypad": HEX},
        {"inputs": [0|1, ...]} (the input status, reported unsolicited in the
        answer to the next poll as osdp_ISTATR; the line {"inputs_sent": [...]}
        follows once libosdp has queued it), {"query": "sc"}, {"quit": true}.
"""
import argparse
import json
import sys
import threading

from osdp import (PeripheralDevice, PDInfo, PDCapabilities, PdId, Capability,
                  LibFlag, LogLevel, Event, CardFormat, StatusReportType)
from common import TtyChannel, emit

ap = argparse.ArgumentParser()
ap.add_argument("--device", required=True)
ap.add_argument("--address", type=int, required=True)
ap.add_argument("--scbk")
ap.add_argument("--install-mode", action="store_true")
ap.add_argument("--enforce-secure", action="store_true")
ap.add_argument("--inputs", type=int, default=0,
                help="contact inputs offered (osdp_PDCAP function 1)")
args = ap.parse_args()

flags = []
if args.install_mode:
    flags.append(LibFlag.InstallMode)
if args.enforce_secure:
    flags.append(LibFlag.EnforceSecure)
scbk = bytes.fromhex(args.scbk) if args.scbk else None
pd_id = PdId(version=2, model=7, vendor_code=0x00ABCDEF,
             serial_number=0x01020304, firmware_version=0x00030201)
info = PDInfo(args.address, TtyChannel(args.device), scbk=scbk, flags=flags, id=pd_id)
caps = PDCapabilities([
    (Capability.OutputControl, 1, 1),
    (Capability.LEDControl, 1, 1),
    (Capability.AudibleControl, 1, 1),
    (Capability.CommunicationSecurity, 1, 1),
    (Capability.CheckCharacter, 1, 0),
] + ([(Capability.ContactStatusMonitoring, 1, args.inputs)] if args.inputs else []))
# libosdp's reader answers osdp_ISTAT with a NAK: its input status goes
# out only as events, unsolicited in the answer to the next poll.
pd = PeripheralDevice(info, caps, log_level=LogLevel.Warning)
pd.start()
emit({"ready": True})
stop = threading.Event()


def commands():
    while not stop.is_set():
        cmd = pd.get_command(timeout=0.5)
        if cmd is not None:
            emit({"command": cmd})


t = threading.Thread(target=commands, daemon=True)
t.start()
for line in sys.stdin:
    req = json.loads(line)
    if "card" in req:
        fmt = CardFormat.Wiegand if req.get("format") == "wiegand" else CardFormat.Unspecified
        pd.submit_event({"event": Event.CardRead, "reader_no": 0, "direction": 0,
                         "length": req["bits"], "format": fmt,
                         "data": bytes.fromhex(req["card"])})
    elif "keypad" in req:
        pd.submit_event({"event": Event.KeyPress, "reader_no": 0,
                         "data": bytes.fromhex(req["keypad"])})
    elif "inputs" in req:
        bits = req["inputs"]
        pd.submit_event({"event": Event.Status, "type": StatusReportType.Input,
                         "report": bytes(bits)})
        emit({"inputs_sent": bits})
    elif req.get("query") == "sc":
        emit({"sc_active": bool(pd.is_sc_active())})
    elif "quit" in req:
        break
stop.set()
pd.teardown()

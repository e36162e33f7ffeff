"""libosdp as an OSDP control panel on a tty, driven by JSON lines.

stdout: {"online": bool, "sc": bool}, then one line per event from the device
        and per answered request.
stdin:  {"led": true}, {"buzzer": true}, {"output": true}, {"keyset": HEX},
        (with --install-mode and --scbk, the panel provisions the keyless
        device over SCBK-D)
        {"query": "status"}, {"quit": true}.
"""
import argparse
import json
import sys

from osdp import (ControlPanel, PDInfo, LibFlag, LogLevel, Command,
                  CommandLEDColor)
from common import TtyChannel, emit

ap = argparse.ArgumentParser()
ap.add_argument("--device", required=True)
ap.add_argument("--address", type=int, required=True)
ap.add_argument("--scbk")
ap.add_argument("--install-mode", action="store_true")
args = ap.parse_args()

flags = [LibFlag.EnforceSecure] if args.scbk and not args.install_mode else []
if args.install_mode:
    flags.append(LibFlag.InstallMode)
scbk = bytes.fromhex(args.scbk) if args.scbk else None
info = PDInfo(args.address, TtyChannel(args.device), scbk=scbk, flags=flags)


def on_event(pd, event):
    emit({"event": event})
    return 0


cp = ControlPanel([info], log_level=LogLevel.Warning, event_handler=on_event)
cp.start()
online = cp.online_wait(args.address, timeout=10)
emit({"online": online, "sc": cp.is_sc_active(args.address)})
for line in sys.stdin:
    req = json.loads(line)
    if "led" in req:
        ok = cp.submit_command(args.address, {
            "command": Command.LED, "reader": 0, "led_number": 0,
            "control_code": 1, "on_count": 5, "off_count": 5,
            "on_color": CommandLEDColor.Green, "off_color": CommandLEDColor.Black,
            "timer_count": 30, "temporary": True})
        emit({"submitted": "led", "ok": bool(ok)})
    elif "buzzer" in req:
        ok = cp.submit_command(args.address, {
            "command": Command.Buzzer, "reader": 0, "control_code": 2,
            "on_count": 3, "off_count": 1, "rep_count": 2})
        emit({"submitted": "buzzer", "ok": bool(ok)})
    elif "output" in req:
        ok = cp.submit_command(args.address, {
            "command": Command.Output, "output_no": 0, "control_code": 4,
            "timer_count": 50})
        emit({"submitted": "output", "ok": bool(ok)})
    elif "keyset" in req:
        ok = cp.submit_command(args.address, {
            "command": Command.Keyset, "type": 1,
            "data": bytes.fromhex(req["keyset"])})
        emit({"submitted": "keyset", "ok": bool(ok)})
    elif req.get("query") == "status":
        emit({"online": cp.is_online(args.address), "sc": cp.is_sc_active(args.address)})
    elif "quit" in req:
        break
cp.teardown()

"""pyzmq's sync context, sockets and poller, and pyusb's devices, on the loop; zmq.asyncio's
sockets and poller (awaited), non-blocking flags and zero timeouts stay clean."""

import usb.core
import usb.util
import zmq
import zmq.asyncio


async def request(endpoint: str, body: bytes) -> bytes:
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.connect(endpoint)
    sock.send(body)  # error: COB102
    reply = sock.recv()  # error: COB102
    sock.close()
    return reply


async def drain(sock: zmq.Socket) -> list[bytes]:
    out = []
    while sock.poll(0):
        out.append(sock.recv(zmq.NOBLOCK))
    sock.send_multipart([b"ack"], flags=zmq.DONTWAIT)
    out.extend(sock.recv_multipart())  # error: COB102
    return out


async def wait_for_reply(sock: zmq.Socket, timeout_ms: int) -> bool:
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    if poller.poll(0):
        return True
    return bool(poller.poll(timeout_ms))  # error: COB102


async def shutdown() -> None:
    zmq.Context.instance().term()  # error: COB102


async def async_request(endpoint: str, body: bytes) -> bytes:
    ctx = zmq.asyncio.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.connect(endpoint)
    await sock.send(body)
    poller = zmq.asyncio.Poller()
    poller.register(sock, zmq.POLLIN)
    await poller.poll(1000)
    return await sock.recv()


async def read_meter(vendor: int, product: int) -> bytes:
    dev = usb.core.find(idVendor=vendor, idProduct=product)  # error: COB100
    dev.set_configuration()  # error: COB100
    dev.ctrl_transfer(0x40, 0x01, 0, 0, b"\x01")  # error: COB100
    return bytes(dev.read(0x81, 64, timeout=1000))  # error: COB100


def describe(dev: usb.core.Device) -> str:
    return usb.util.get_string(dev, dev.iProduct)


# pyserial and other hardware I/O: listing the ports reads every device's sysfs entries,
# a port's reads wait for bytes; the same calls offloaded stay clean
import asyncio

import serial
import serial.tools.list_ports
import smbus2
import spidev
from serial.tools import list_ports


async def find_adapter() -> str | None:
    for port in serial.tools.list_ports.comports():  # error: COB100
        if port.vid == 0x0403:
            return port.device
    return None


async def find_adapter_offloaded() -> list[str]:
    ports = await asyncio.to_thread(list_ports.comports)
    return [p.device for p in ports]


async def poll_port(port: serial.Serial) -> bytes:
    port.reset_input_buffer()  # error: COB100
    return port.read_all() or b""  # error: COB100


async def read_sensor(bus_id: int) -> int:
    bus = smbus2.SMBus(bus_id)  # error: COB100
    return bus.read_byte_data(0x48, 0)  # error: COB100


async def spi_frame(dev: spidev.SpiDev) -> list[int]:
    return dev.xfer2([0x01, 0x80, 0])  # error: COB100


def read_sensor_sync(bus: smbus2.SMBus) -> int:
    return bus.read_byte_data(0x48, 0)


async def read_sensor_offloaded(bus: smbus2.SMBus) -> int:
    return await asyncio.to_thread(read_sensor_sync, bus)

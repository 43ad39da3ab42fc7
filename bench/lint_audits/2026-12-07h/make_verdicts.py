"""Verdicts of audit 2026-12-07h, written per finding in sample order before any totals."""
import json

T = "true"; F = "false"; CM = "chain-mismatch"
def v(verdict, reason, cause=None):
    return {"verdict": verdict, "cause": cause, "reason": reason}

PYRO_LOOP = ("Pyrogram methods are coroutines run on the client's loop (the sync wrapper in pyrogram/sync.py "
             "runs them with run_until_complete or run_coroutine_threadsafe on the main loop)")
def isfile(fn):
    return v(T, f"os.path.isfile() on the caller's str argument in async {fn}: a stat on the loop; {PYRO_LOOP}")
ACC = ("SQLiteStorage.{m}() (awaited in Client.connect/start, e.g. client.py:619-646) -> _accessor() with no value "
       "-> _get() -> inspect.stack(): getframeinfo -> findsource -> linecache.checkcache stats every frame's source "
       "file (and reads it on first use) on the loop; _get then also runs a sqlite query (a file database for FileStorage)")

V = {
 "Pyrogram-2.0.106|cob": [
  isfile("SendAnimation.send_animation"),
  isfile("SendVideo.send_video"),
  v(T, ACC.format(m="dc_id")),
  isfile("SendMediaGroup.send_media_group (item media path)"),
  v(T, "os.remove(temp_file_path) in handle_download's except-BaseException branch (download error or cancel); handle_download is awaited or scheduled as a task by download_media on the loop"),
  v(T, ACC.format(m="is_bot")),
  isfile("EditMessageMedia.edit_message_media"),
  isfile("SendVoice.send_voice"),
  v(T, ACC.format(m="test_mode")),
  isfile("EditMessageMedia.edit_message_media"),
  isfile("EditMessageMedia.edit_message_media"),
  v(T, "os.remove(self.database) of the .session file in FileStorage.delete, awaited by Client.log_out (methods/auth/log_out.py:49) on the loop"),
  v(T, ACC.format(m="api_id")),
  isfile("SendMediaGroup.send_media_group (item media path)"),
  isfile("SetChatPhoto.set_chat_photo"),
 ],
 "Pyrogram-2.0.106|ruff": [
  isfile("SendVideo.send_video"),
  isfile("EditMessageMedia.edit_message_media"),
  isfile("SendVoice.send_voice"),
  isfile("SendAnimation.send_animation"),
  isfile("SendMediaGroup.send_media_group"),
  isfile("EditMessageMedia.edit_message_media"),
  v(T, "open(temp_file_path, 'wb') in Client.handle_download when not in_memory; run on the loop by download_media"),
  isfile("SendVideoNote.send_video_note"),
  isfile("EditInlineMedia.edit_inline_media"),
  isfile("SendAudio.send_audio"),
  isfile("SendMediaGroup.send_media_group"),
  isfile("EditMessageMedia.edit_message_media"),
  isfile("SendSticker.send_sticker"),
  isfile("SendDocument.send_document"),
  isfile("SendPhoto.send_photo"),
 ],
 "Pyrogram-2.0.106|f8": [
  isfile("SendVideoNote.send_video_note"),
  isfile("EditMessageMedia.edit_message_media"),
  isfile("SendAudio.send_audio"),
  isfile("SendMediaGroup.send_media_group"),
  isfile("EditMessageMedia.edit_message_media"),
  v(T, "open(path, 'rb') of the upload file in SaveFile.save_file, awaited by every send_* method on the loop"),
  isfile("SendVoice.send_voice"),
  isfile("EditMessageMedia.edit_message_media"),
  isfile("SendDocument.send_document"),
  isfile("SendMediaGroup.send_media_group"),
  isfile("EditMessageMedia.edit_message_media"),
  isfile("SendVideo.send_video"),
  isfile("SendMediaGroup.send_media_group"),
  isfile("SendSticker.send_sticker"),
  isfile("SendMediaGroup.send_media_group"),
 ],
 "microdot-2.7.0|cob": [
  v(T, "os.remove(tmpname) in the close() closure FileUpload.copy installs; awaited by FileUpload.close (from with_form_data's cleanup, multipart.py:297) in the request handler on the loop"),
  v(T, "open(path_or_file, 'wb') in FileUpload.save when given a path; called from async request handlers on the loop"),
  v(T, "open(tmpname, 'x+b') creating a temp file in FileUpload.copy, awaited by with_form_data for every large upload on the loop"),
 ],
 "microdot-2.7.0|ruff": [
  v(T, "open(tmpname, 'w+b') in FileUpload.copy's ENOENT fallback (MicroPython ports without mode 'x', which microdot supports): creates a file on the loop when it runs"),
  v(T, "open(path_or_file, 'wb') in FileUpload.save when given a path, on the loop"),
  v(T, "open(tmpname, 'x+b') in FileUpload.copy, on the loop"),
 ],
 "microdot-2.7.0|f8": [
  v(T, "f.read(1) of the file just opened in the ENOENT fallback of FileUpload.copy: a read of a disk file on the loop (path runs on MicroPython ports without mode 'x')"),
  v(T, "f.write(buffer) of the first chunk into the disk temp file in FileUpload.copy, on the loop (reaches the file at the flush by seek(0) in the same block)"),
  v(F, "f.close() under `if f.read(1) != b''` right after open(tmpname, 'w+b'): 'w+b' truncates, so read(1) is always b'' and the branch cannot run; the file would also be created and never written (nothing to flush)", "branch that cannot run / close of a never-written file"),
  v(F, "f.close() in the close() closure of FileUpload.copy: every write to f was flushed by f.seek(0) (multipart.py:231) before the closure exists, and only reads follow, so close has nothing to flush (borderline: the rubric's 'nothing to flush' principle applied to a written-then-flushed file)", "close() with nothing left to flush"),
  v(T, "open(tmpname, 'x+b') in FileUpload.copy, on the loop"),
  v(T, "open(path_or_file, 'wb') in FileUpload.save, on the loop"),
  v(T, "f.seek(0) after f.write(buffer) and save()'s writes: seek flushes the pending buffered writes to the disk file, on the loop"),
  v(T, "open(tmpname, 'w+b') in the ENOENT fallback of FileUpload.copy (MicroPython ports), on the loop"),
  v(T, "f.read(n) of the disk temp file in the read() closure, awaited by FileUpload.read/save in the handler on the loop"),
 ],
 "ormar-0.26.0|cob": [
  v(T, "time.sleep(1) inside the pytest-asyncio test test_model_creation, between awaited queries: sleeps the loop"),
 ],
 "ormar-0.26.0|ruff": [
  v(T, "same line as corevo-obs: time.sleep(1) in the async test, on the loop"),
 ],
 "ormar-0.26.0|f8": [
  v(T, "same line as corevo-obs: time.sleep(1) in the async test, on the loop"),
 ],
 "panoramisk-1.4|cob": [
  v(T, "originate() (run by loop.run_until_complete in main) -> CallManager.from_config (inherited Manager.from_config) -> utils.config -> ConfigParser.read(sys.argv[1]): the config file is opened and read on the loop"),
 ],
}
LF = ("{fn} (pytest-asyncio, asyncio_mode = auto in pyproject.toml) -> load_fixture -> "
      "get_fixture_path(...).read_text(): reads a fixture JSON file on the loop")
FPR = ("fake_post_request is patched in place of AbstractAsyncAuth.async_post_api_request/async_post_request by the "
       "async_account fixture (tests/conftest.py), so it is awaited on the test's loop; this branch ({b}) -> load_fixture -> Path.read_text() reads a fixture file on the loop")
V["pyatmo-9.9.1|cob"] = [
  v(T, LF.format(fn="test_async_velux_modules")),
  v(T, FPR.format(b="default endpoint fixture")),
  v(T, LF.format(fn="test_async_shutter_nxo")),
  v(T, LF.format(fn="async fixture async_home_legrand")),
  v(T, LF.format(fn="test_async_switch_NLIS_follows_parent_unreachable")),
  v(T, FPR.format(b="getmeasure")),
  v(T, FPR.format(b="homestatus")),
  v(T, LF.format(fn="test_async_shutter_nxo")),
  v(T, FPR.format(b="POSTFIX endpoint fixture")),
  v(T, LF.format(fn="test_async_home_module_reachable_absent_key_preserved")),
  v(T, LF.format(fn="test_async_velux_modules")),
  v(T, LF.format(fn="async fixture async_home_legrand")),
]
Y = "yapapi storage providers run in the Golem engine's asyncio tasks"
V["yapapi-0.13.1|cob"] = [
  v(T, f"open(file_path, 'rb') in the chunks() async generator of GftpDestination.download_stream, iterated by download_bytes/download_file on the loop; {Y}"),
  v(T, "self._temp_dir.exists() (a stat) in GftpProvider.__aexit__, on the loop"),
  v(T, "f.write(chunk) of each received chunk into the temp file in GftpProvider.upload_stream, on the loop"),
  v(T, "f.read(30_000) of the downloaded file in chunks(), on the loop"),
  v(T, "GftpProvider.upload_stream -> __new_file -> _temp_file -> tempfile.mkstemp (creates a file in the temp dir) then os.close, on the loop"),
  v(T, "Path(destination_file).exists() (a stat) in GftpProvider.new_destination, on the loop"),
  v(T, "open(destination_file, 'wb') in Destination.download_file, on the loop"),
  v(CM, "prop_find -> _parse_prop_resp -> ElementTree.parse(StringIO(xml)): parsing an in-memory StringIO does not block; but the call does block on first use through the function's own `from xml.etree import ElementTree` (xml.etree is imported nowhere else in yapapi), an import from disk on the loop (borderline: one-time block; false if first-use imports were not counted)"),
  v(T, "f.read(_BUF_SIZE) of the uploaded file in the read_file() async generator of InputStorageProvider.upload_file, consumed by upload_stream on the loop"),
  v(T, "f.write(chunk) into the destination file in Destination.download_file, on the loop"),
  v(T, "file_path.stat() of the downloaded file in GftpDestination.download_stream, on the loop"),
  v(T, "f.read(30_000) in the chunks() loop, on the loop"),
  v(T, "GftpProvider.__aexit__ -> _delete_if_exists -> path.exists() (and unlink) of each temporary file, on the loop"),
  v(T, "open(file_name, 'wb') of the new temp file in GftpProvider.upload_stream, on the loop"),
  v(T, "io.open(path, 'rb') in the read_file() async generator of upload_file, on the loop"),
]
V["yapapi-0.13.1|ruff"] = [
  v(T, "open(file_path, 'rb') in chunks() of GftpDestination.download_stream, on the loop"),
  v(T, "fp.stat() in InputStorageProvider.upload_file, on the loop"),
  v(T, "Path(destination_file).exists() in GftpProvider.new_destination, on the loop"),
  v(T, "io.open(path, 'rb') in read_file() of upload_file, on the loop"),
  v(T, "file_path.stat() in GftpDestination.download_stream, on the loop"),
  v(T, "open(file_name, 'wb') in GftpProvider.upload_stream, on the loop"),
  v(T, "open(destination_file, 'wb') in Destination.download_file, on the loop"),
]
V["yapapi-0.13.1|f8"] = [
  v(T, "open(file_path, 'rb') in chunks(), on the loop"),
  v(T, "f.read(30_000) in chunks(), on the loop"),
  v(T, "f.read(30_000) in the chunks() loop, on the loop"),
  v(T, "io.open(path, 'rb') in read_file(), on the loop"),
  v(T, "f.write(chunk) into the temp file in GftpProvider.upload_stream, on the loop"),
  v(T, "open(destination_file, 'wb') in Destination.download_file, on the loop"),
  v(T, "open(file_name, 'wb') in GftpProvider.upload_stream, on the loop"),
  v(T, "f.write(chunk) in Destination.download_file, on the loop"),
]
if __name__ == "__main__":
    import sys
    samples = json.load(open(sys.argv[1]))
    out = {}
    for k, s in samples.items():
        vs = V.get(k, [])
        assert len(vs) == len(s["sample"]), (k, len(vs), len(s["sample"]))
        out[k] = vs
    json.dump(out, open(sys.argv[2], "w"), indent=1)
    print("wrote", len(out), "lists")

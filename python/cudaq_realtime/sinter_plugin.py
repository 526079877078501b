"""sinter decoders: cudaq_realtime.sinter_decoders() for
sinter.collect(custom_decoders=...) and
`sinter collect --custom_decoders_module_function cudaq_realtime:sinter_decoders`."""
import numpy as np

try:
    import sinter
    _Decoder = sinter.Decoder
    _Compiled = sinter.CompiledDecoder
except ImportError:  # sinter is optional: the classes still work, as plain objects
    sinter = None
    _Decoder = object
    _Compiled = object


class _CompiledDecoder(_Compiled):
    def __init__(self, decoder):
        self.decoder = decoder

    def decode_shots_bit_packed(self, *, bit_packed_detection_event_data: np.ndarray) -> np.ndarray:
        return self.decoder.decode_batch(bit_packed_detection_event_data, bit_packed_shots=True,
                                         bit_packed_predictions=True)


class MwpmSinterDecoder(_Decoder):
    """"cudaq-mwpm": cudaq_realtime.Matching over the task's DEM."""

    def compile_decoder_for_dem(self, *, dem):
        from .matching import Matching
        return _CompiledDecoder(Matching.from_detector_error_model(dem))

    def decode_via_files(self, *, num_shots, num_dets, num_obs, dem_path, dets_b8_in_path,
                         obs_predictions_b8_out_path, tmp_dir):
        from .matching import Matching
        m = Matching.from_detector_error_model_file(dem_path)
        _via_files(m, num_shots, num_dets, dets_b8_in_path, obs_predictions_b8_out_path)


class HybridSinterDecoder(_Decoder):
    """"cudaq-hybrid": the shipped predecoder model made for the task's circuit
    (cudaq_realtime.find_model: distance, rounds, basis, detector layout),
    then MWPM. Raises LookupError for a circuit no shipped model fits, or use
    HybridSinterDecoder(model_path) for a model of your own."""

    def __init__(self, model=None):
        self.model = model

    def compile_decoder_for_dem(self, *, dem):
        from .hybrid import HybridDecoder
        return _CompiledDecoder(HybridDecoder(self.model, dem))

    def decode_via_files(self, *, num_shots, num_dets, num_obs, dem_path, dets_b8_in_path,
                         obs_predictions_b8_out_path, tmp_dir):
        import stim
        from .hybrid import HybridDecoder
        d = HybridDecoder(self.model, stim.DetectorErrorModel.from_file(dem_path))
        _via_files(d, num_shots, num_dets, dets_b8_in_path, obs_predictions_b8_out_path)


def _via_files(decoder, num_shots, num_dets, dets_path, out_path):
    shots = np.fromfile(dets_path, dtype=np.uint8).reshape(num_shots, (num_dets + 7) // 8)
    decoder.decode_batch(shots, bit_packed_shots=True, bit_packed_predictions=True).tofile(out_path)


def sinter_decoders():
    """{"cudaq-mwpm": ..., "cudaq-hybrid": ...} for sinter."""
    return {"cudaq-mwpm": MwpmSinterDecoder(), "cudaq-hybrid": HybridSinterDecoder()}

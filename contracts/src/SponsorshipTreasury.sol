// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {SponsorshipRegistry} from "./SponsorshipRegistry.sol";

/// @title SponsorshipTreasury
/// @notice Holds the native token and pays a fixed amount, once per wallet, when an authorised relayer asks.
/// @dev Gas matters: one `sponsor` call bounds the throughput of the whole service. The amount and the pause
///      flag share one storage slot, the registry is immutable, the transfer copies no return data.
///      Ordering is checks, effects (registry mark, event), interaction (the transfer), and a transient lock
///      refuses any re-entry, so a recipient contract cannot be paid twice nor drain the treasury.
contract SponsorshipTreasury {
    /// @notice The registry this treasury writes; deployed by the constructor, owned by nobody.
    SponsorshipRegistry public immutable registry;

    // Slot 0, read in one SLOAD by `sponsor`.
    uint128 private _amount;
    bool private _paused;

    address public owner;
    mapping(address account => bool) public isRelayer;

    bool private transient _locked;

    error NotOwner(address caller);
    error NotRelayer(address caller);
    error TreasuryPaused();
    error AlreadySponsored(address wallet);
    error InsufficientBalance(uint256 balance, uint256 amount);
    error TransferFailed(address wallet);
    error ZeroAddress();
    error InvalidAmount(uint256 amount);
    error Reentrancy();

    /// @dev `requestIdHash` is keccak256 of the request's 16-byte UUID, never the id itself: everything here is
    ///      public, and the id is the requester's key to its own record (IP, User-Agent).
    event Sponsored(address indexed wallet, bytes32 indexed requestIdHash, uint256 amount, address indexed relayer);
    event Funded(address indexed from, uint256 amount);
    event Withdrawn(address indexed to, uint256 amount);
    event AmountChanged(uint256 previousAmount, uint256 newAmount);
    event RelayerAdded(address indexed relayer);
    event RelayerRemoved(address indexed relayer);
    event Paused(address indexed by);
    event Unpaused(address indexed by);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        _;
    }

    modifier nonReentrant() {
        if (_locked) revert Reentrancy();
        _locked = true;
        _;
        _locked = false;
    }

    /// @param amount_ Wei paid per sponsorship.
    /// @param relayers Accounts authorised to call `sponsor` from the start.
    /// @dev Payable: the deployment may fund the treasury in the same transaction.
    constructor(uint256 amount_, address[] memory relayers) payable {
        owner = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
        registry = new SponsorshipRegistry(address(this));
        _setAmount(amount_);
        for (uint256 i; i < relayers.length; ++i) _addRelayer(relayers[i]);
        if (msg.value > 0) emit Funded(msg.sender, msg.value);
    }

    receive() external payable {
        emit Funded(msg.sender, msg.value);
    }

    /// @notice Pays `amount()` to `wallet` and marks it in the registry.
    /// @param requestIdHash keccak256 of the request's 16-byte UUID (the calldata is public too, so the id itself
    ///        never reaches the chain); emitted as is, so the service finds the payment of a request by it.
    function sponsor(address payable wallet, bytes32 requestIdHash) external nonReentrant {
        if (!isRelayer[msg.sender]) revert NotRelayer(msg.sender);
        if (_paused) revert TreasuryPaused();
        if (wallet == address(0)) revert ZeroAddress();
        uint256 amount_ = _amount;
        uint256 balance = address(this).balance;
        if (balance < amount_) revert InsufficientBalance(balance, amount_);

        // Effects first: the registry reverts AlreadySponsored(wallet) the second time.
        registry.markSponsored(wallet);
        emit Sponsored(wallet, requestIdHash, amount_, msg.sender);

        // Interaction last. All gas is forwarded (smart-contract wallets need more than 2,300), no return
        // data is copied (a recipient cannot make the treasury pay for a huge return buffer).
        bool ok;
        assembly ("memory-safe") {
            ok := call(gas(), wallet, amount_, 0, 0, 0, 0)
        }
        if (!ok) revert TransferFailed(wallet);
    }

    function amount() external view returns (uint256) {
        return _amount;
    }

    function paused() external view returns (bool) {
        return _paused;
    }

    function setAmount(uint256 newAmount) external onlyOwner {
        _setAmount(newAmount);
    }

    function addRelayer(address relayer) external onlyOwner {
        _addRelayer(relayer);
    }

    function removeRelayer(address relayer) external onlyOwner {
        if (isRelayer[relayer]) {
            isRelayer[relayer] = false;
            emit RelayerRemoved(relayer);
        }
    }

    function pause() external onlyOwner {
        if (!_paused) {
            _paused = true;
            emit Paused(msg.sender);
        }
    }

    function unpause() external onlyOwner {
        if (_paused) {
            _paused = false;
            emit Unpaused(msg.sender);
        }
    }

    function withdraw(address payable to, uint256 value) external onlyOwner nonReentrant {
        if (to == address(0)) revert ZeroAddress();
        uint256 balance = address(this).balance;
        if (balance < value) revert InsufficientBalance(balance, value);
        emit Withdrawn(to, value);
        bool ok;
        assembly ("memory-safe") {
            ok := call(gas(), to, value, 0, 0, 0, 0)
        }
        if (!ok) revert TransferFailed(to);
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert ZeroAddress();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    function _setAmount(uint256 newAmount) private {
        if (newAmount == 0 || newAmount > type(uint128).max) revert InvalidAmount(newAmount);
        emit AmountChanged(_amount, newAmount);
        _amount = uint128(newAmount);
    }

    function _addRelayer(address relayer) private {
        if (relayer == address(0)) revert ZeroAddress();
        if (!isRelayer[relayer]) {
            isRelayer[relayer] = true;
            emit RelayerAdded(relayer);
        }
    }
}

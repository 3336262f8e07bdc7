// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @notice Test-only: a contract wallet that refuses payments while `refusing` is set (its receive reverts), as a
/// wallet that cannot be paid does (decisions.md, "Wallets that cannot be paid"), or while `hungry` is set, unless
/// the payment comes with more gas than a relay gives (a wallet whose receive needs more than the relay's limit).
contract RefusingWallet {
    bool public refusing;
    bool public hungry;

    constructor(bool refusing_) {
        refusing = refusing_;
    }

    function setRefusing(bool refusing_) external {
        refusing = refusing_;
    }

    function setHungry(bool hungry_) external {
        hungry = hungry_;
    }

    receive() external payable {
        require(!refusing, "this wallet refuses payments");
        require(!hungry || gasleft() > 200_000, "this wallet needs more gas than a relay gives");
    }
}
